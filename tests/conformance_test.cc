// The conformance suite of the one execution model: every executable kind
// (a device loop, a pipeline) on every configuration (replicas 1/2/4, IPUs
// per replica 1/2/4, schedule, offloading) must train the model of
// pipelining/pipeline_test_model.h to the weights of the single-device
// reference, and every replica must end with bitwise-equal weights.
//
// Data parallelism is checked as the guides state it: R replicas x M
// micro-batches per weight update (mean over both, PopTorch's default) ==
// one device accumulating R x M micro-batches, i.e. one batch of R x M x b.
// Replica r reads dataset elements r, r + R, ...: the same R x M elements
// per update as the reference's consecutive ones.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/math/mul.h"
#include "ops/nn/relu.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/state/read_variable.h"
#include "ops/state/update_shard.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"
#include "optimizers/cross_replica.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/momentum.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow {
namespace {

using pipelining::testing::InitialValues;
using pipelining::testing::MaxDifference;
using pipelining::testing::MicroBatches;
using pipelining::testing::ModelStage;
using pipelining::testing::ModelStages;
using pipelining::testing::TrainReference;
using Method = optimizers::GradientAccumulationReductionMethod;

constexpr int kMicroBatches = 4;  // Per replica per weight update.
constexpr int kRuns = 2;          // Weight updates.
constexpr char kWeights[] = ".*/[wb][0-9]";

std::shared_ptr<optimizers::Optimizer> Momentum() {
  return std::make_shared<optimizers::MomentumOptimizer>(0.1f, 0.9f);
}

std::unique_ptr<IPUSystem> MakeSystem(int ipus, int replicas) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.set_replication_factor(replicas);
  // Offload (and shard) even this model's small optimizer state.
  config.set_minimum_remote_tensor_size(4);
  return std::move(IPUSystem::Create(config)).value();
}

// Per replica, the model's variables by short name ("w0"), from
// Executable::ReadVariables; checks that replicas are bitwise equal.
std::map<std::string, Tensor> ReplicaZeroAndCheckEqual(const Executable& exe,
                                                       int replicas) {
  auto vars = exe.ReadVariables(kWeights);
  EXPECT_TRUE(vars.ok()) << vars.status();
  if (!vars.ok()) return {};
  std::map<std::string, Tensor> out;
  for (const auto& [name, per_replica] : *vars) {
    EXPECT_EQ(static_cast<int>(per_replica.size()), replicas) << name;
    for (size_t r = 1; r < per_replica.size(); ++r) {
      EXPECT_EQ(
          std::memcmp(per_replica[r].raw_data(), per_replica[0].raw_data(),
                      per_replica[0].TotalBytes()),
          0)
          << name << " differs between replica 0 and " << r;
    }
    out[name.substr(name.rfind('/') + 1)] = per_replica[0];
  }
  return out;
}

// The whole model trained by `opt` in a device loop of `steps` iterations.
absl::StatusOr<loops::Loop> ModelLoop(const Scope& scope,
                                      const std::map<std::string, Tensor>& init,
                                      optimizers::Optimizer& opt, int steps,
                                      feeds::IPUInfeedQueue* infeed) {
  return loops::Repeat(
      scope, steps,
      [&](const Scope& s, const std::vector<Output>& batch) {
        std::vector<Output> h = batch;
        for (int st = 0; st < 4; ++st) h = ModelStage(st, s, h, init);
        opt.Minimize(s, ops::SoftmaxCrossEntropyLoss(s, h[0], h[1]));
        return std::vector<Output>{};
      },
      {}, infeed);
}

// The model as a four-stage SGD training pipeline on IPUs 0-3.
absl::StatusOr<std::unique_ptr<pipelining::Pipeline>> SgdPipeline(
    const Scope& scope, const std::map<std::string, Tensor>& init,
    feeds::IPUInfeedQueue* infeed) {
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = kMicroBatches;
  o.infeed_queue = infeed;
  o.optimizer_function = pipelining::testing::SgdCrossEntropy(0.1f);
  return pipelining::Pipeline::Create(scope, o);
}

std::map<std::string, Tensor> Reference(int replicas) {
  return TrainReference(InitialValues(1), replicas * kMicroBatches, kRuns,
                        /*mean=*/true, Momentum);
}

struct Config {
  int replicas;
  int ipus_per_replica;  // 2 or 4 for pipelines.
  pipelining::PipelineSchedule schedule;
  bool offload;
  bool rts = false;  // Replicated optimizer-state sharding.
};

std::string Name(const ::testing::TestParamInfo<Config>& info) {
  const Config& c = info.param;
  return absl::StrCat("R", c.replicas, "x", c.ipus_per_replica, "ipus_",
                      pipelining::PipelineScheduleName(c.schedule),
                      c.offload ? "_offload" : "", c.rts ? "_rts" : "");
}

class PipelineConformanceTest : public ::testing::TestWithParam<Config> {};

TEST_P(PipelineConformanceTest, TrainsAsTheSingleDeviceReference) {
  const Config c = GetParam();
  auto init = InitialValues(1);
  auto system = MakeSystem(c.replicas * c.ipus_per_replica, c.replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(
      MicroBatches(c.replicas * kMicroBatches * kRuns));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.device_mapping = c.ipus_per_replica == 4
                         ? std::vector<pipelining::StageDevices>{0, 1, 2, 3}
                         : std::vector<pipelining::StageDevices>{0, 0, 1, 1};
  o.gradient_accumulation_count = kMicroBatches;
  o.repeat_count = kRuns;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.outfeed_loss = true;
  o.pipeline_schedule = c.schedule;
  o.reduction_method = Method::kMean;
  o.offload_weight_update_variables = c.offload;
  o.replicated_optimizer_state_sharding = c.rts;
  o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
    return pipelining::OptimizerFunctionOutput{
        std::make_shared<optimizers::CrossReplicaOptimizer>(Momentum()),
        ops::SoftmaxCrossEntropyLoss(s, out[0], out[1])};
  };
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto exe = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->num_replicas(), c.replicas);
  EXPECT_EQ((*exe)->ipus_per_replica(), c.ipus_per_replica);
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
  EXPECT_EQ(static_cast<int>(results.size()), c.replicas);

  auto trained = ReplicaZeroAndCheckEqual(**exe, c.replicas);
  ASSERT_EQ(trained.size(), 7u);
  EXPECT_LT(MaxDifference(trained, Reference(c.replicas)), 2e-5);
  EXPECT_GT(MaxDifference(trained, init), 1e-2);  // The weights moved.
  // One loss per micro-batch per replica: [steps, R] (or [steps]).
  auto losses = outfeed->Dequeue();
  ASSERT_TRUE(losses.ok()) << losses.status();
  const TensorShape want =
      c.replicas > 1 ? TensorShape({kMicroBatches * kRuns, c.replicas})
                     : TensorShape({kMicroBatches * kRuns});
  EXPECT_EQ((*losses)["loss"].shape(), want);
  // Sharding is reported with its per-replica saving.
  EXPECT_EQ((*exe)->MemoryReport().find(absl::StrCat(
                "sharded over ", c.replicas, " replicas")) != std::string::npos,
            c.rts && c.replicas > 1)
      << (*exe)->MemoryReport();
}

std::vector<Config> PipelineConfigs() {
  std::vector<Config> out;
  for (int r : {1, 2, 4}) {
    for (int ipus : {2, 4}) {
      for (auto schedule : {pipelining::PipelineSchedule::kGrouped,
                            pipelining::PipelineSchedule::kInterleaved,
                            pipelining::PipelineSchedule::kSequential}) {
        // Interleaved training needs one stage per IPU (validation.h).
        if (ipus == 2 &&
            schedule == pipelining::PipelineSchedule::kInterleaved) {
          continue;
        }
        for (bool offload : {false, true}) {
          out.push_back({r, ipus, schedule, offload});
          // RTS with one replica shards nothing (shard {0, 1}).
          if (offload) out.push_back({r, ipus, schedule, true, true});
        }
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Configurations, PipelineConformanceTest,
                         ::testing::ValuesIn(PipelineConfigs()), Name);

// Inference: replicated pipelines send each replica's logits to the
// outfeed as [steps, R, ...]; step m of replica r is micro-batch m R + r,
// and its logits equal a host Session's forward pass of that micro-batch.
class InferenceConformanceTest
    : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(InferenceConformanceTest, OutfeedEqualsTheHostForwardPass) {
  const auto [replicas, ipus] = GetParam();
  constexpr int kSteps = 4;  // Micro-batches per replica.
  auto init = InitialValues(1);
  auto system = MakeSystem(replicas * ipus, replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(replicas * kSteps));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.device_mapping = ipus == 4
                         ? std::vector<pipelining::StageDevices>{0, 1, 2, 3}
                         : std::vector<pipelining::StageDevices>{0, 0, 1, 1};
  o.gradient_accumulation_count = kSteps;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  ASSERT_TRUE(
      strategy.Run(*scope.graph(), {}, {(*pipeline)->frame()}).status().ok());
  auto out = outfeed->Dequeue();
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& logits = (*out)["0"];
  const TensorShape per_step =
      TensorShape({pipelining::testing::kBatch, pipelining::testing::kClasses});
  ASSERT_EQ(
      logits.shape(),
      replicas > 1
          ? TensorShape({kSteps, replicas, per_step.dim(0), per_step.dim(1)})
          : TensorShape({kSteps, per_step.dim(0), per_step.dim(1)}));
  // The host reference, micro-batch by micro-batch, in dataset order.
  Scope host = Scope::NewRootScope();
  Output x = ops::Placeholder(
      host, DType::kFloat32,
      {pipelining::testing::kBatch, pipelining::testing::kFeatures});
  Output y =
      ops::Placeholder(host, DType::kInt32, {pipelining::testing::kBatch});
  std::vector<Output> h = {x, y};
  for (int st = 0; st < 4; ++st) h = ModelStage(st, host, h, init);
  Session session(host.graph());
  ASSERT_TRUE(session.Initialize().ok());
  auto it = MicroBatches(replicas * kSteps)->MakeIterator();
  const int64_t n = per_step.num_elements();
  for (int i = 0; i < replicas * kSteps; ++i) {
    auto batch = it->GetNext();
    ASSERT_TRUE(batch.ok()) << batch.status();
    std::vector<Tensor> want;
    ASSERT_TRUE(
        session.Run({{x, (*batch)[0]}, {y, (*batch)[1]}}, {h[0]}, &want).ok());
    const int m = i / replicas, r = i % replicas;
    const float* got = logits.data<float>() + (m * replicas + r) * n;
    for (int64_t k = 0; k < n; ++k) {
      ASSERT_NEAR(got[k], want[0].data<float>()[k], 1e-5)
          << "step " << m << " replica " << r << " element " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReplicasAndIpus, InferenceConformanceTest,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(2, 4)));

// A device loop on one IPU per replica: the whole model in one program,
// CrossReplicaGradientAccumulationOptimizerV2 with mean over micro-batches
// and replicas.
class LoopConformanceTest : public ::testing::TestWithParam<int> {};

TEST_P(LoopConformanceTest, TrainsAsTheSingleDeviceReference) {
  const int replicas = GetParam();
  auto init = InitialValues(1);
  auto system = MakeSystem(replicas, replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(
      MicroBatches(replicas * kMicroBatches * kRuns));
  auto inner = Momentum();
  optimizers::CrossReplicaGradientAccumulationOptimizerV2 opt(
      inner.get(), kMicroBatches, Method::kMean);
  auto loop = ModelLoop(scope, init, opt, kMicroBatches * kRuns, infeed.get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto exe = strategy.Compile(*scope.graph(), {}, {loop->op});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
  auto trained = ReplicaZeroAndCheckEqual(**exe, replicas);
  ASSERT_EQ(trained.size(), 7u);
  EXPECT_LT(MaxDifference(trained, Reference(replicas)), 2e-5);
  EXPECT_GT(MaxDifference(trained, init), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Replicas, LoopConformanceTest,
                         ::testing::Values(1, 2, 4));

// The device loop's wrapper with its optimizer state offloaded, sharded
// over the replicas or not: the weights and the momentum of the run without
// offloading, bitwise, and those of the single-device reference; the
// report keeps 1/R of the remote state per replica. Sharded (ZeRO-1), each
// replica's update computes only its chunk of every weight (the chunks
// cover each weight once) and the gradient all-reduce becomes a
// reduce-scatter plus the weight's all-gather (ring bytes per IPU:
// 2 (R-1)/R x n x 4 against 2 (R-1) x ceil(n/R) x 4 per weight).
class LoopOffloadConformanceTest
    : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(LoopOffloadConformanceTest, BitwiseAsWithoutOffloading) {
  const auto [replicas, rts] = GetParam();
  std::map<std::string, std::vector<Tensor>> state[2];
  IpuMemory memory[2];
  std::vector<int64_t> updated[2], sent[2];  // Per IPU.
  for (bool offload : {false, true}) {
    auto init = InitialValues(1);
    auto system = MakeSystem(replicas, replicas);
    Scope scope = Scope::NewRootScope();
    auto infeed = *feeds::IPUInfeedQueue::Create(
        MicroBatches(replicas * kMicroBatches * kRuns));
    auto inner = Momentum();
    optimizers::WeightUpdateOptions wu;
    wu.offload_weight_update_variables = offload;
    wu.replicated_optimizer_state_sharding = offload && rts;
    optimizers::CrossReplicaGradientAccumulationOptimizerV2 opt(
        inner.get(), kMicroBatches, Method::kMean,
        optimizers::ReplicaReduction::kMean, {}, wu);
    auto loop =
        ModelLoop(scope, init, opt, kMicroBatches * kRuns, infeed.get());
    ASSERT_TRUE(loop.ok()) << loop.status();
    IPUStrategy strategy(system.get());
    ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
    auto exe = strategy.Compile(*scope.graph(), {}, {loop->op});
    ASSERT_TRUE(exe.ok()) << exe.status();
    memory[offload] = (*exe)->ipu_memory()[0];
    std::vector<std::vector<Tensor>> results;
    for (int k = 0; k < replicas; ++k) system->device(k).counters().Reset();
    ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
    for (int k = 0; k < replicas; ++k) {
      updated[offload].push_back(
          system->device(k).counters().updated_elements.load());
      sent[offload].push_back(system->device(k).counters().ipu_to_ipu.load());
    }
    auto trained = ReplicaZeroAndCheckEqual(**exe, replicas);
    EXPECT_LT(MaxDifference(trained, Reference(replicas)), 2e-5);
    auto vars = (*exe)->ReadVariables(".*/[wb][0-9](/.*Momentum/.*)?");
    ASSERT_TRUE(vars.ok()) << vars.status();
    state[offload] = *vars;
  }
  ASSERT_EQ(state[0].size(), 14u);  // 7 weights and their momentum.
  // Per weight update. A weight's update is sharded when its momentum is:
  // at least minimum_remote_tensor_size (4 B) x R.
  const bool zero1 = rts && replicas > 1;
  int64_t elements = 0, all_reduce = 0, sharded = 0, once = 0;
  for (const auto& [name, per_replica] : state[0]) {
    if (name.find("Momentum") != std::string::npos) continue;
    const int64_t n = per_replica[0].NumElements();
    const int64_t reduce = 2 * (replicas - 1) * n * 4 / replicas;
    const bool shard = zero1 && n * 4 >= 4 * replicas;
    elements += n;
    all_reduce += reduce;
    sharded += shard ? 2 * (replicas - 1) * ((n + replicas - 1) / replicas) * 4
                     : reduce;
    once += shard ? n : replicas * n;
  }
  int64_t covered = 0;
  for (int k = 0; k < replicas; ++k) {
    EXPECT_EQ(updated[0][k], kRuns * elements) << k;
    EXPECT_EQ(sent[0][k], kRuns * all_reduce) << k;
    EXPECT_EQ(sent[1][k], kRuns * sharded) << k;
    if (zero1) {
      // At most ceil(n/R) of each of the 7 weights.
      EXPECT_LE(updated[1][k], kRuns * (elements / replicas + 7)) << k;
    } else {
      EXPECT_EQ(updated[1][k], kRuns * elements) << k;
    }
    covered += updated[1][k];
  }
  EXPECT_EQ(covered, kRuns * once);  // A sharded weight's chunks cover it.
  for (const auto& [name, per_replica] : state[0]) {
    ASSERT_EQ(state[1].count(name), 1u) << name;
    for (int r = 0; r < replicas; ++r) {
      const Tensor& a = per_replica[r];
      const Tensor& b = state[1][name][r];
      EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()), 0)
          << name << " replica " << r;
    }
  }
  // Every momentum tensor (>= 4 B) is remote: the on-chip optimizer state
  // shrinks by exactly what the remote category holds.
  EXPECT_EQ(memory[0].remote_state, 0);
  EXPECT_GT(memory[1].remote_state, 0);
  EXPECT_EQ(memory[1].optimizer_state,
            memory[0].optimizer_state - memory[1].remote_state);
  if (rts && replicas > 1) {
    EXPECT_EQ(memory[1].sharded_over, replicas);
    EXPECT_LT(memory[1].remote_shards,
              memory[1].remote_state / replicas + 4 * 7);  // + padding.
    EXPECT_GE(memory[1].remote_shards, memory[1].remote_state / replicas);
  } else {
    EXPECT_EQ(memory[1].remote_shards, memory[1].remote_state);
  }
}

INSTANTIATE_TEST_SUITE_P(ReplicasAndSharding, LoopOffloadConformanceTest,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Bool()));

// The model's stages, w1 in float16 when `float16_w1` (stage 1 computes
// its product in float16; Adam keeps a float32 master of w1).
std::vector<pipelining::ComputationalStage> ModelStagesWithFloat16W1(
    const std::map<std::string, Tensor>& init, bool float16_w1) {
  std::vector<pipelining::ComputationalStage> stages = ModelStages(init);
  if (!float16_w1) return stages;
  stages[1] = pipelining::StageFunction(
      [&init](const Scope& sc, const std::vector<Output>& args) {
        ops::VariableHandle w1 = ops::Variable(
            sc.WithOpName("w1"),
            ops::Cast(sc, ops::Const(sc, init.at("w1")), DType::kFloat16));
        ops::VariableHandle b1 =
            ops::Variable(sc.WithOpName("b1"), ops::Const(sc, init.at("b1")));
        Output h = ops::MatMul(sc, ops::Cast(sc, args[0], DType::kFloat16),
                               ops::ReadVariable(sc, w1.handle));
        h = ops::Add(sc, ops::Cast(sc, h, DType::kFloat32),
                     ops::ReadVariable(sc, b1.handle));
        return std::vector<Output>{ops::Relu(sc, h), args[1]};
      },
      /*num_inputs=*/2);
  return stages;
}

// RTS keeps 1/R of the offloaded optimizer state per replica and changes
// no number: the weights and Adam's state equal those of the same run
// without it, bitwise. The update is sharded (ZeRO-1): each replica's IPUs
// compute only their chunk of each weight whose state is sharded (the
// chunks of the replicas cover it once), the rest whole. With a float16
// w1 its float32 master is sharded with m and v: each replica updates its
// chunk of the master, rounds it into w1, and w1 is all-gathered.
class PipelineShardingTest
    : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PipelineShardingTest, SameWeightsAndStateOneChunkOfTheUpdate) {
  const auto [replicas, float16_w1] = GetParam();
  constexpr int kIpus = 2, kUpdates = 2;  // Per replica; repeat_count.
  std::map<std::string, Tensor> weights[2], adam_m[2];
  int64_t remote[2] = {0, 0};
  std::vector<int64_t> updated[2], sent[2];  // Per IPU of the system.
  std::map<std::string, int> ipu_of;         // Weight -> IPU within a replica.
  for (bool rts : {false, true}) {
    auto init = InitialValues(1);
    auto system = MakeSystem(kIpus * replicas, replicas);
    Scope scope = Scope::NewRootScope();
    auto infeed =
        *feeds::IPUInfeedQueue::Create(MicroBatches(4 * kUpdates * replicas));
    pipelining::PipelineOptions o;
    o.computational_stages = ModelStagesWithFloat16W1(init, float16_w1);
    o.device_mapping = {0, 0, 1, 1};
    o.gradient_accumulation_count = 4;
    o.repeat_count = kUpdates;
    o.infeed_queue = infeed.get();
    o.offload_weight_update_variables = true;
    o.replicated_optimizer_state_sharding = rts;
    o.optimizer_function = [float16_w1 = float16_w1](
                               const Scope& s, const std::vector<Output>& out) {
      auto adam = std::make_shared<optimizers::AdamOptimizer>(0.01f);
      adam->set_master_weights(float16_w1);
      return pipelining::OptimizerFunctionOutput{
          std::make_shared<optimizers::CrossReplicaOptimizer>(adam),
          ops::SoftmaxCrossEntropyLoss(s, out[0], out[1])};
    };
    auto pipeline = pipelining::Pipeline::Create(scope, o);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    IPUStrategy strategy(system.get());
    ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
    for (int k = 0; k < kIpus * replicas; ++k) {
      system->device(k).counters().Reset();
    }
    auto exe = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
    ASSERT_TRUE(exe.ok()) << exe.status();
    std::vector<std::vector<Tensor>> results;
    ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
    auto report = (*pipeline)->last_report();
    ASSERT_TRUE(report.has_value());
    for (int k = 0; k < kIpus * replicas; ++k) {
      updated[rts].push_back(
          system->device(k).counters().updated_elements.load());
      sent[rts].push_back(system->device(k).counters().ipu_to_ipu.load());
    }
    for (int64_t b : report->ipu_remote_bytes) remote[rts] += b;
    weights[rts] = ReplicaZeroAndCheckEqual(**exe, replicas);
    auto vars = (*exe)->ReadVariables(kWeights);
    ASSERT_TRUE(vars.ok()) << vars.status();
    for (const auto& [name, per_replica] : *vars) {
      const size_t at = name.find("stage");
      ASSERT_NE(at, std::string::npos) << name;
      ipu_of[name.substr(name.rfind('/') + 1)] = (name[at + 5] - '0') / 2;
    }
    // Adam's moments (and w1's master) live in remote memory between runs
    // (sharded with RTS): ReadVariables reassembles them, equal on every
    // replica.
    auto moments =
        (*exe)->ReadVariables(".*stage1/w1/Adam/(master|(master/Adam/)?[mv])");
    ASSERT_TRUE(moments.ok()) << moments.status();
    ASSERT_EQ(moments->size(), float16_w1 ? 3u : 2u);
    for (const auto& [name, per_replica] : *moments) {
      ASSERT_EQ(static_cast<int>(per_replica.size()), replicas);
      EXPECT_EQ(per_replica.back().shape(), TensorShape({8, 8})) << name;
      EXPECT_TRUE(ipuflow::testing::TensorNear(per_replica.back(),
                                               per_replica[0], 0, 0))
          << name;
      adam_m[rts][name] = per_replica[0];
    }
  }
  for (const auto& [name, t] : adam_m[0]) {
    EXPECT_TRUE(ipuflow::testing::TensorNear(t, adam_m[1][name], 0, 0)) << name;
  }
  ASSERT_EQ(weights[0].size(), 7u);
  for (const auto& [name, t] : weights[0]) {
    EXPECT_EQ(
        std::memcmp(t.raw_data(), weights[1][name].raw_data(), t.TotalBytes()),
        0)
        << name;
  }
  // Adam's m and v of every variable (48+8+64+8+64+24+3 floats) and its
  // step counter (4 bytes). Sharded over R: each tensor's ceil(n/R) floats;
  // what is below minimum_remote_tensor_size x R = 4R bytes (b3's 12-byte
  // slots over 4 replicas, the counter) stays on the IPU.
  const int64_t r = replicas;  // (C++17 lambdas cannot capture a binding)
  const auto sharded = [r](int64_t n) { return n * 4 >= 4 * r; };
  int64_t want_remote = 0;
  for (int64_t n : {48, 8, 64, 8, 64, 24, 3}) {
    if (sharded(n)) want_remote += 2 * 4 * ((n + replicas - 1) / replicas);
  }
  // w1's float32 master: 64 floats more.
  const int64_t master = float16_w1 ? 4 * 64 : 0;
  EXPECT_EQ(remote[0], 2 * 4 * (48 + 8 + 64 + 8 + 64 + 24 + 3) + 4 + master);
  EXPECT_EQ(remote[1], want_remote + master / replicas);
  // Elements each IPU's update kernels computed: without sharding every
  // replica's IPU its weights whole; with it, replica r chunk r
  // ([r c, min(n, (r+1) c)), c = ceil(n/R)) of each sharded weight.
  // Bytes each replica's IPUs sent (the device program counts a replica's
  // collectives on its first IPU): the same activations and gradients
  // between the stages; per sharded weight a ring reduce-scatter of the
  // float32 gradient and an all-gather of the weight in ceil(n/R) chunks
  // ((R-1) c x (4 + the weight's element size)) instead of the all-reduce
  // (2 (R-1)/R x n x 4), and no all-gather of the state on load
  // (all-gathering Adam's moments on load would send (R-1) c x 4 more
  // each).
  for (int r = 0; r < replicas; ++r) {
    int64_t more_bytes = 0, sent_more = 0;
    for (int k = 0; k < kIpus; ++k) {
      int64_t whole = 0, chunk = 0;
      for (const auto& [name, t] : weights[0]) {
        if (ipu_of[name] != k) continue;
        const int64_t n = t.NumElements(), c = (n + replicas - 1) / replicas;
        whole += n;
        chunk += sharded(n) ? std::min(n, (r + 1) * c) - std::min(n, r * c) : n;
        if (sharded(n)) {  // Gradients in float32, w1 gathered in float16.
          const int64_t w_bytes = DTypeSize(t.dtype());
          more_bytes += (replicas - 1) * c * (4 + w_bytes) -
                        2 * (replicas - 1) * n * 4 / replicas;
        }
      }
      const int ipu = r * kIpus + k;
      EXPECT_EQ(updated[0][ipu], kUpdates * whole) << "IPU " << ipu;
      EXPECT_EQ(updated[1][ipu], kUpdates * chunk) << "IPU " << ipu;
      EXPECT_LE(updated[1][ipu], kUpdates * (whole / replicas + 4))
          << "IPU " << ipu;
      sent_more += sent[1][ipu] - sent[0][ipu];
    }
    EXPECT_EQ(sent_more, kUpdates * more_bytes) << "replica " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(ReplicasAndFloat16W1, PipelineShardingTest,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Bool()));

TEST(ReplicatedOptimizerStateShardingTest, RequiresReplicaIdenticalUpdates) {
  auto init = InitialValues(1);
  auto system = MakeSystem(8, 2);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(8));
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = kMicroBatches;
  o.infeed_queue = infeed.get();
  o.offload_weight_update_variables = true;
  o.replicated_optimizer_state_sharding = true;
  o.optimizer_function = pipelining::testing::SgdCrossEntropy(0.1f);
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  absl::Status s =
      strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("wrap the optimizer 'GradientDescent' in "
                             "optimizers::CrossReplicaOptimizer"),
            std::string::npos)
      << s;
}

TEST(ReplicatedOptimizerStateShardingTest, RequiresOffloading) {
  auto init = InitialValues(1);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(8));
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = 4;
  o.infeed_queue = infeed.get();
  o.replicated_optimizer_state_sharding = true;
  o.optimizer_function = pipelining::testing::SgdCrossEntropy(0.1f);
  absl::Status s = pipelining::Pipeline::Create(scope, o).status();
  EXPECT_NE(s.message().find("To use replicated_optimizer_state_sharding, "
                             "optimizer state must be offloaded by using "
                             "offload_weight_update_variables."),
            std::string::npos)
      << s;
}

// A budget that the loop body or a pipeline stage exceeds is refused when
// compiling, with the per-category report, on every replica count.
class BudgetConformanceTest : public ::testing::TestWithParam<int> {};

// Loop bodies and pipeline stages are refused in one report format: every
// IPU of a replica, every category (core/memory_plan.h's IpuMemory).
void ExpectTheOneReport(const absl::Status& s) {
  EXPECT_NE(s.message().find("out of memory: "), std::string::npos) << s;
  for (const char* category :
       {"IPU 0 (shard 0): ", "always-live:     ", "weights ",
        "gradient accumulators ", "optimizer state ", "constants ",
        "not-always-live: ", "intermediates by liveness", "weight update ",
        "stash:           ", "incoming FIFOs "}) {
    EXPECT_NE(s.message().find(category), std::string::npos) << category << s;
  }
}

std::unique_ptr<IPUSystem> TinySystem(int ipus, int replicas) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.set_replication_factor(replicas);
  config.set_tiles_per_ipu(1);
  config.set_memory_per_tile(1024);  // The model's weights alone need more.
  return std::move(IPUSystem::Create(config)).value();
}

TEST_P(BudgetConformanceTest, LoopBodyOverBudgetIsRefused) {
  const int replicas = GetParam();
  auto init = InitialValues(1);
  auto system = TinySystem(replicas, replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(8));
  auto inner = Momentum();
  optimizers::CrossReplicaOptimizer opt(inner.get());
  auto loop = ModelLoop(scope, init, opt, 2, infeed.get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  absl::Status s = strategy.Compile(*scope.graph(), {}, {loop->op}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ExpectTheOneReport(s);
  EXPECT_NE(s.message().find("loop bodies:"), std::string::npos) << s;
}

TEST_P(BudgetConformanceTest, PipelineStageOverBudgetIsRefused) {
  const int replicas = GetParam();
  auto init = InitialValues(1);
  auto system = TinySystem(replicas * 4, replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(8));
  auto pipeline = SgdPipeline(scope, init, infeed.get());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  absl::Status s =
      strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ExpectTheOneReport(s);
  // The stage parts are the frame node's sub-programs: the report names
  // the largest as it names a loop's body.
  EXPECT_NE(s.message().find("(largest: 'pipeline/frame stage"),
            std::string::npos)
      << s;
  // The frame compiled as any loop is refused the same way.
  absl::Status direct =
      strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()}).status();
  EXPECT_EQ(direct.code(), absl::StatusCode::kResourceExhausted) << direct;
  ExpectTheOneReport(direct);
}

INSTANTIATE_TEST_SUITE_P(Replicas, BudgetConformanceTest,
                         ::testing::Values(1, 2));

// The pipeline is a frame in the graph: compiling the graph with its frame
// node as the target (as for a loop) gives a DeviceProgram over R replicas
// of the pipeline's IPUs, which trains as the single-device reference.
class FrameConformanceTest : public ::testing::TestWithParam<int> {};

TEST_P(FrameConformanceTest, FrameCompilesAndRunsLikeALoop) {
  const int replicas = GetParam();
  auto init = InitialValues(1);
  auto system = MakeSystem(replicas * 4, replicas);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(
      MicroBatches(replicas * kMicroBatches * kRuns));
  pipelining::PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = kMicroBatches;
  o.repeat_count = kRuns;
  o.infeed_queue = infeed.get();
  o.reduction_method = Method::kMean;
  o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
    return pipelining::OptimizerFunctionOutput{
        std::make_shared<optimizers::CrossReplicaOptimizer>(Momentum()),
        ops::SoftmaxCrossEntropyLoss(s, out[0], out[1])};
  };
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  Node* frame = (*pipeline)->frame();
  ASSERT_NE(frame, nullptr);
  EXPECT_EQ(frame->op(), "PipelineFrame");
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto exe = strategy.Compile(*scope.graph(), {}, {frame});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->num_replicas(), replicas);
  EXPECT_EQ((*exe)->ipus_per_replica(), 4);
  EXPECT_NE((*exe)->MemoryReport().find("IPU 3 (shard 3): "), std::string::npos)
      << (*exe)->MemoryReport();
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*exe)->Execute({{}}, &results).ok());
  EXPECT_EQ(static_cast<int>(results.size()), replicas);
  auto trained = ReplicaZeroAndCheckEqual(**exe, replicas);
  ASSERT_EQ(trained.size(), 7u);
  EXPECT_LT(MaxDifference(trained, Reference(replicas)), 2e-5);
  EXPECT_GT(MaxDifference(trained, init), 1e-2);  // The weights moved.
}

INSTANTIATE_TEST_SUITE_P(Replicas, FrameConformanceTest,
                         ::testing::Values(1, 2));

// A frame is lowered per device program: two programs compiled from the
// graph (two strategies) coexist and both run it; once the Pipeline is
// gone, a program's run is refused, naming the frame.
TEST(FrameLifetimeTest, ProgramsOfOneFrameCoexistAndOutliveItSafely) {
  auto init = InitialValues(1);
  auto system = MakeSystem(4, 1);
  Scope scope = Scope::NewRootScope();
  auto infeed =
      *feeds::IPUInfeedQueue::Create(MicroBatches(2 * kMicroBatches)->Repeat());
  auto pipeline = SgdPipeline(scope, init, infeed.get());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto direct = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
  ASSERT_TRUE(direct.ok()) << direct.status();
  IPUStrategy other(system.get());
  auto second = other.Compile(*scope.graph(), {}, {(*pipeline)->frame()});
  ASSERT_TRUE(second.ok()) << second.status();
  std::vector<std::vector<Tensor>> results;
  ASSERT_TRUE((*direct)->Execute({{}}, &results).ok());
  ASSERT_TRUE((*second)->Execute({{}}, &results).ok());
  auto report = (*pipeline)->last_report();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->micro_batches, kMicroBatches);
  pipeline->reset();  // The frame goes with its Pipeline.
  const absl::Status gone = (*direct)->Execute({{}}, &results);
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition) << gone;
  EXPECT_NE(gone.message().find("is gone"), std::string::npos) << gone;
}

// Execute takes [replica][argument]: a pipeline's arguments are the values
// of its `inputs`, here a scale that differs per replica.
TEST(ExecuteTest, PipelineArgumentsPerReplica) {
  auto system = MakeSystem(4, 2);
  Scope scope = Scope::NewRootScope();
  const Tensor x = ipuflow::testing::RandomTensor({8 * 4, 6}, -1, 1, 5);
  auto infeed = *feeds::IPUInfeedQueue::Create(
      feeds::FromTensorSlices({x})->Batch(4, true));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  pipelining::PipelineOptions o;
  const Output scale_in = ops::Placeholder(scope, DType::kFloat32, {});
  o.inputs = {scale_in};
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& args) {
        return std::vector<Output>{ops::Mul(s, args[1], args[0])};
      },
      [](const Scope& s, const std::vector<Output>& args) {
        return std::vector<Output>{ops::Identity(s, args[0])};
      }};
  o.gradient_accumulation_count = 4;  // Micro-batches per replica.
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  auto exe = strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()},
                              {{scale_in, Tensor::Scalar<float>(1)}});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<std::vector<Tensor>> results;
  const float scale[2] = {1, 10};
  ASSERT_TRUE((*exe)
                  ->Execute({{Tensor::Scalar<float>(scale[0])},
                             {Tensor::Scalar<float>(scale[1])}},
                            &results)
                  .ok());
  auto out = outfeed->Dequeue();
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)["0"];
  ASSERT_EQ(y.shape(), TensorShape({4, 2, 4, 6}));
  // Step m, replica r: micro-batch 2m + r (element i goes to replica i % 2).
  for (int m = 0; m < 4; ++m) {
    for (int r = 0; r < 2; ++r) {
      for (int i = 0; i < 4 * 6; ++i) {
        const float want = x.data<float>()[(2 * m + r) * 24 + i] * scale[r];
        ASSERT_EQ(y.data<float>()[(m * 2 + r) * 24 + i], want)
            << "step " << m << " replica " << r;
      }
    }
  }
  // A wrong count of argument lists is an error naming both.
  absl::Status bad = (*exe)->Execute({{}, {}, {}}, &results);
  EXPECT_NE(bad.message().find("3 argument lists for 2 replicas"),
            std::string::npos)
      << bad;
}

TEST(ReplicationFactorTest, TooManyReplicasNamesAllThree) {
  auto init = InitialValues(1);
  auto system = MakeSystem(6, 2);
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(8));
  auto pipeline = SgdPipeline(scope, init, infeed.get());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  IPUStrategy strategy(system.get());
  absl::Status s =
      strategy.Compile(*scope.graph(), {}, {(*pipeline)->frame()}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("replication_factor 2 x 4 IPUs per replica = 8 "
                             "IPUs but the system has 6"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace ipuflow
