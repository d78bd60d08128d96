// The PopTorch-style strategies: a four-block MLP (and a model with two
// parallel blocks) staged by each strategy, run as an inference pipeline on
// four emulated IPUs, must give the values the same blocks give on the host;
// the schedule, stage->IPU mapping and every strategy error are checked.
#include "pipelining/execution_strategy.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "feeds/dataset.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/concat.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/nn/relu.h"
#include "ops/nn/tanh.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_descent.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::pipelining {
namespace {

// Strategies here place blocks on 1-4 IPUs: one replica whatever the count
// (by default a system runs num_ipus / ipus_per_replica replicas).
std::unique_ptr<IPUSystem> OneReplicaOnFourIpus() {
  IPUConfig config;
  config.set_auto_select_ipus(4);
  config.set_replication_factor(1);
  return std::move(IPUSystem::Create(config)).value();
}

using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::TensorNear;
using ::testing::HasSubstr;

constexpr int kBatch = 2;
constexpr int kFeatures = 4;
constexpr int kMicroBatches = 12;  // A multiple of 2, 3 and 4 stages.

// A dense layer whose weight is a variable created in the block.
StageBody Dense(Tensor w, bool relu) {
  return [w, relu](const Scope& s, const std::vector<Output>& args) {
    ops::VariableHandle v = ops::Variable(s.WithOpName("w"), ops::Const(s, w));
    Output y = ops::MatMul(s, args[0], v.value);
    return std::vector<Output>{relu ? ops::Relu(s, y) : y};
  };
}

// B1..B4: 4 -> 8 -> 8 -> 6 -> 3, ReLU between; ipu_ids optional.
BlockModel Mlp(std::vector<std::optional<int>> ipus = {{}, {}, {}, {}}) {
  const int dims[5] = {kFeatures, 8, 8, 6, 3};
  BlockModel model;
  for (int i = 0; i < 4; ++i) {
    Tensor w = RandomTensor({dims[i], dims[i + 1]}, -1, 1, 10 + i);
    EXPECT_TRUE(
        model.Add(absl::StrCat("B", i + 1), Dense(w, i < 3), ipus[i]).ok());
  }
  return model;
}

// B1 -> (B2a || B2b) -> B3: B3 reads both branches.
BlockModel Branched(std::vector<std::optional<int>> ipus = {{}, {}, {}, {}}) {
  BlockModel model;
  EXPECT_TRUE(model
                  .Add("B1",
                       Dense(RandomTensor({kFeatures, 8}, -1, 1, 20), true),
                       ipus[0])
                  .ok());
  EXPECT_TRUE(
      model.Add("B2a", Dense(RandomTensor({8, 5}, -1, 1, 21), true), ipus[1])
          .ok());
  Tensor wb = RandomTensor({8, 3}, -1, 1, 22);
  EXPECT_TRUE(model
                  .AddParallel(
                      "B2b",
                      [wb](const Scope& s, const std::vector<Output>& args) {
                        ops::VariableHandle v =
                            ops::Variable(s.WithOpName("w"), ops::Const(s, wb));
                        return std::vector<Output>{
                            ops::Tanh(s, ops::MatMul(s, args[0], v.value))};
                      },
                      ipus[2])
                  .ok());
  Tensor w3 = RandomTensor({8, 3}, -1, 1, 23);
  EXPECT_TRUE(model
                  .Add(
                      "B3",
                      [w3](const Scope& s, const std::vector<Output>& args) {
                        EXPECT_EQ(args.size(), 2u);  // B2a's, then B2b's.
                        Output h = ops::Concat(s, args, 1);
                        return Dense(w3, false)(s, {h});
                      },
                      ipus[3])
                  .ok());
  return model;
}

Tensor Inputs() {
  return RandomTensor({kMicroBatches * kBatch, kFeatures}, -1, 1, 3);
}

// The blocks applied directly on the host.
Tensor Reference(const BlockModel& model, const Tensor& x) {
  Scope s = Scope::NewRootScope();
  Output in = ops::Placeholder(s, DType::kFloat32, x.shape());
  std::vector<Output> out = model.Apply(s, {in});
  EXPECT_EQ(out.size(), 1u);
  return ::ipuflow::testing::RunOne(s, {{in, x}}, out[0]);
}

struct Ran {
  ScheduleTable table;
  Tensor out;  // [micro-batches * kBatch, classes]
  std::shared_ptr<Graph> graph;
};

// x split into micro-batches of kBatch rows.
absl::StatusOr<std::unique_ptr<feeds::IPUInfeedQueue>> MicroBatchInfeed(
    const Tensor& x) {
  return feeds::IPUInfeedQueue::Create(
      feeds::FromTensorSlices({x})->Batch(kBatch, /*drop_remainder=*/true));
}

// ApplyStrategy + Pipeline + Run in inference over kMicroBatches.
absl::StatusOr<Ran> RunPipelined(const BlockModel& model,
                                 const ExecutionStrategy& strategy,
                                 const Tensor& x) {
  std::unique_ptr<IPUSystem> system = OneReplicaOnFourIpus();
  ASSIGN_OR_RETURN(auto infeed, MicroBatchInfeed(x));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  PipelineOptions o;
  o.gradient_accumulation_count = kMicroBatches;
  RETURN_IF_ERROR(ApplyStrategy(model, strategy, &o));
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  Scope scope = Scope::NewRootScope();
  ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(scope, o));
  IPUStrategy ipu(system.get());
  RETURN_IF_ERROR(ipu.Initialize(*scope.graph()));
  RETURN_IF_ERROR(
      ::ipuflow::pipelining::testing::RunPipeline(ipu, *pipeline).status());
  ASSIGN_OR_RETURN(feeds::OutfeedResult result, outfeed->Dequeue());
  if (result.size() != 1) {
    return absl::InternalError(
        absl::StrCat("outfeed has ", result.size(), " values, expected 1"));
  }
  Ran ran;
  ran.table = pipeline->table();
  ASSIGN_OR_RETURN(ran.out,
                   result.tensors[0].Reshaped(
                       {kMicroBatches * kBatch, result.tensors[0].dim(2)}));
  ran.graph = scope.graph_ptr();
  return ran;
}

// Checks the run against the host and returns it.
Ran RunAndCompare(const BlockModel& model, const ExecutionStrategy& strategy) {
  const Tensor x = Inputs();
  absl::StatusOr<Ran> ran = RunPipelined(model, strategy, x);
  EXPECT_TRUE(ran.ok()) << ran.status();
  if (!ran.ok()) return {};
  EXPECT_TRUE(TensorNear(ran->out, Reference(model, x), 1e-5, 1e-5));
  return *std::move(ran);
}

std::string PlanError(const BlockModel& model,
                      const ExecutionStrategy& strategy) {
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(model, strategy);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
      << (plan.ok() ? plan->ToString() : "");
  return std::string(plan.status().message());
}

// ---------------------------------------------------------------- BlockModel

TEST(BlockModelTest, AutoIdsAndLookup) {
  BlockModel model;
  StageBody id = [](const Scope&, const std::vector<Output>& a) { return a; };
  ASSERT_TRUE(model.Add("", id).ok());
  ASSERT_TRUE(model.Add("named", id).ok());
  ASSERT_TRUE(model.AddParallel("", id, 1).ok());
  ASSERT_EQ(model.size(), 3);
  EXPECT_EQ(model.blocks()[0].name, "0");
  EXPECT_EQ(model.blocks()[2].name, "1");
  EXPECT_TRUE(model.blocks()[2].parallel);
  EXPECT_EQ(model.blocks()[2].ipu_id, 1);
  EXPECT_EQ(model.Find("named"), 1);
  EXPECT_EQ(model.Find("2"), -1);
}

TEST(BlockModelTest, AddErrors) {
  BlockModel model;
  StageBody id = [](const Scope&, const std::vector<Output>& a) { return a; };
  absl::Status first = model.AddParallel("P", id);
  EXPECT_EQ(first.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(first.message(), HasSubstr("block 'P' is the first block"));
  ASSERT_TRUE(model.Add("B1", id).ok());
  absl::Status dup = model.Add("B1", id);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.message(), HasSubstr("Block 'B1' already exists"));
  // An automatic id colliding with a user's name is a duplicate too.
  ASSERT_TRUE(model.Add("0", id).ok());
  EXPECT_EQ(model.Add("", id).code(), absl::StatusCode::kAlreadyExists);
  absl::Status neg = model.Add("B2", id, -1);
  EXPECT_EQ(neg.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(neg.message(), HasSubstr("Block 'B2': ipu_id -1 is negative"));
  absl::Status empty = model.Add("B3", StageBody());
  EXPECT_THAT(empty.message(), HasSubstr("Block 'B3' has no function"));
  EXPECT_EQ(model.size(), 2);
}

TEST(BlockModelTest, ApplyChainsBlocksAndParallelGroups) {
  // x -> [x+1] -> ([2x], [3x]) -> [a + b]: 5 * (x + 1).
  auto scale = [](float k) {
    return [k](const Scope& s, const std::vector<Output>& a) {
      return std::vector<Output>{ops::Mul(s, a[0], ops::Const(s, k))};
    };
  };
  BlockModel model;
  ASSERT_TRUE(model
                  .Add("inc",
                       [](const Scope& s, const std::vector<Output>& a) {
                         return std::vector<Output>{
                             ops::Add(s, a[0], ops::Const(s, 1.0f))};
                       })
                  .ok());
  ASSERT_TRUE(model.Add("two", scale(2)).ok());
  ASSERT_TRUE(model.AddParallel("three", scale(3)).ok());
  ASSERT_TRUE(model
                  .Add("sum",
                       [](const Scope& s, const std::vector<Output>& a) {
                         EXPECT_EQ(a.size(), 2u);
                         return std::vector<Output>{ops::Add(s, a[0], a[1])};
                       })
                  .ok());
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {3});
  std::vector<Output> y = model.Apply(s, {x});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].node->block(), "sum");
  EXPECT_EQ(y[0].node->name(), "sum/Add");
  Tensor out = ::ipuflow::testing::RunOne(
      s, {{x, Tensor::FromVector<float>({0, 1, -2})}}, y[0]);
  EXPECT_TRUE(TensorNear(out, {5, 10, -5}, {3}));
}

// ------------------------------------------------------------ Plans and runs

TEST(ExecutionStrategyTest, PipelinedOneStagePerBlock) {
  BlockModel model = Mlp();
  // PopTorch: PipelinedExecution("B1", "B2", "B3", "B4"): stage s on IPU s.
  auto strategy = PipelinedExecution("B1", "B2", "B3", "B4");
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(model, strategy);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ToString(),
            "stage 0: [B1] on IPU 0\nstage 1: [B2] on IPU 1\n"
            "stage 2: [B3] on IPU 2\nstage 3: [B4] on IPU 3");
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kGrouped);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 1, 2, 3}));
  // Every MatMul is tagged with its block and placed on its stage's IPU.
  std::set<std::string> seen;
  for (int i = 0; i < ran.graph->num_nodes(); ++i) {
    const Node* n = ran.graph->node(i);
    if (n->op() != "MatMul") continue;
    seen.insert(n->block());
    EXPECT_EQ(n->ipu(), n->block()[1] - '1') << n->name();
    EXPECT_THAT(n->name(), HasSubstr(n->block() + "/"));
  }
  EXPECT_EQ(seen, std::set<std::string>({"B1", "B2", "B3", "B4"}));
}

TEST(ExecutionStrategyTest, PipelinedStagesOfSeveralBlocks) {
  BlockModel model = Mlp();
  // The blocks of a stage may be listed in any order. (The IPUs used must
  // divide the system's 4: IPUs {0, 2} would be 3 shards.)
  auto strategy =
      PipelinedExecution(Stage("B2", "B1").Ipu(1), Stage("B3", "B4").Ipu(0));
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kGrouped);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({1, 0}));
  EXPECT_EQ(ran.table.num_stages, 2);
}

TEST(ExecutionStrategyTest, AutoStageSameAsIpuMergesRunsOfBlocks) {
  BlockModel model = Mlp({0, 0, 1, 3});
  auto strategy = PipelinedExecution();  // AutoStage::kSameAsIpu.
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(model, strategy);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ToString(),
            "stage 0: [B1, B2] on IPU 0\nstage 1: [B3] on IPU 1\n"
            "stage 2: [B4] on IPU 3");
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 1, 3}));
}

TEST(ExecutionStrategyTest, AutoStageAutoIncrementRevisitsIpus) {
  BlockModel model = Mlp({0, 1, 0, 1});
  auto strategy = PipelinedExecution(AutoStage::kAutoIncrement);
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kGrouped);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 1, 0, 1}));
  // Blocks without ipu_id: one stage each, on the IPU numbered like it.
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(
      Mlp({2, 2, {}, {}}), PipelinedExecution(AutoStage::kAutoIncrement));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->StageIpus(), std::vector<int>({2, 1, 2}));
  EXPECT_EQ(plan->stages[0][0].blocks, std::vector<std::string>({"B1", "B2"}));
}

TEST(ExecutionStrategyTest, ShardedRunsOneIpuAtATime) {
  BlockModel model = Mlp({3, 2, 1, 0});
  // As PopTorch's examples: strategy.stage("B1").ipu(0) after construction.
  auto strategy = ShardedExecution("B1", "B2", Stage("B3", "B4"));
  ASSERT_NE(strategy.stage("B1"), nullptr);
  strategy.stage("B1")->Ipu(1);
  EXPECT_EQ(strategy.stage("B9"), nullptr);
  EXPECT_EQ(strategy.stage("B4"), strategy.stage("B3"));
  // B2 keeps its block's ipu_id; B3 and B4 disagree: Ipu decides.
  strategy.stage("B4")->Ipu(3);
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kSequential);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({1, 2, 3}));
  // One item per step: 3 stages x 12 micro-batches.
  EXPECT_EQ(ran.table.num_steps(), 3 * kMicroBatches);
}

TEST(ExecutionStrategyTest, ShardedAutoStage) {
  BlockModel model = Mlp({0, 1, 2, 3});
  Ran ran = RunAndCompare(model, ShardedExecution());
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kSequential);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 1, 2, 3}));
}

TEST(ExecutionStrategyTest, SerialPhasedOnOneIpu) {
  BlockModel model = Mlp();
  // PopTorch's SerialPhasedExecution("B1", ..., "B4"), every stage on IPU 0.
  auto strategy = SerialPhasedExecution("B1", "B2", "B3", "B4");
  for (const char* b : {"B1", "B2", "B3", "B4"}) strategy.stage(b)->Ipu(0);
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kSequential);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 0, 0, 0}));
}

TEST(ExecutionStrategyTest, SerialPhasedRunsParallelStagesOfAPhase) {
  BlockModel model = Branched();
  auto strategy = SerialPhasedExecution(
      Phase(Stage("B1")),  // IPU 0: first stage of its phase.
      Phase(Stage("B2a"), Stage("B2b")).Ipus({2, 3}), Stage("B3").Ipu(1));
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(model, strategy);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->schedule, PipelineSchedule::kSequential);
  EXPECT_EQ(plan->ToString(),
            "stage 0: [B1] on IPU 0\nstage 1: [B2a] on IPU 2 | [B2b] on IPU 3\n"
            "stage 2: [B3] on IPU 1");
  PipelineOptions o;
  ASSERT_TRUE(ApplyStrategy(model, strategy, &o).ok());
  ASSERT_EQ(o.computational_stages.size(), 3u);
  EXPECT_EQ(o.computational_stages[1].functions.size(), 2u);
  EXPECT_EQ(o.device_mapping[1].ipus, std::vector<int>({2, 3}));
  Ran ran = RunAndCompare(model, strategy);
  EXPECT_EQ(ran.table.kind, PipelineSchedule::kSequential);
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 2, 1}));
  // The parallel blocks ran on their own IPUs.
  for (int i = 0; i < ran.graph->num_nodes(); ++i) {
    const Node* n = ran.graph->node(i);
    if (n->op() != "MatMul") continue;
    if (n->block() == "B2a") {
      EXPECT_EQ(n->ipu(), 2);
    } else if (n->block() == "B2b") {
      EXPECT_EQ(n->ipu(), 3);
    }
  }
}

TEST(ExecutionStrategyTest, PipelinedParallelBlocksBecomeConcurrentStages) {
  BlockModel model = Branched({0, 1, 2, 3});
  absl::StatusOr<StrategyPlan> plan = PlanStrategy(model, PipelinedExecution());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ToString(),
            "stage 0: [B1] on IPU 0\nstage 1: [B2a] on IPU 1 | [B2b] on IPU 2\n"
            "stage 2: [B3] on IPU 3");
  Ran ran = RunAndCompare(model, PipelinedExecution());
  EXPECT_EQ(ran.table.stage_ipu, std::vector<int>({0, 1, 3}));
  // A whole parallel group in one stage is one function.
  auto one = PipelinedExecution("B1", Stage("B2a", "B2b").Ipu(1), "B3");
  absl::StatusOr<StrategyPlan> merged = PlanStrategy(model, one);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->stages[1].size(), 1u);
  RunAndCompare(model, one);
}

TEST(ExecutionStrategyTest, ApplyStrategyReplacesOnlyTheStages) {
  PipelineOptions o;
  o.gradient_accumulation_count = 6;
  o.computational_stages.push_back(
      [](const Scope&, const std::vector<Output>& a) { return a; });
  o.pipeline_schedule = PipelineSchedule::kInterleaved;
  ASSERT_TRUE(
      ApplyStrategy(Mlp(), ShardedExecution("B1", Stage("B2", "B3"), "B4"), &o)
          .ok());
  EXPECT_EQ(o.computational_stages.size(), 3u);
  EXPECT_EQ(o.device_mapping.size(), 3u);
  EXPECT_EQ(o.pipeline_schedule, PipelineSchedule::kSequential);
  EXPECT_EQ(o.gradient_accumulation_count, 6);
  EXPECT_EQ(ApplyStrategy(Mlp(), PipelinedExecution(), nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------ Training

// Variables by "<block>/w" (the last two parts of their names).
std::map<std::string, Tensor> ByBlock(
    const std::vector<std::shared_ptr<VariableResource>>& vars) {
  std::map<std::string, Tensor> out;
  for (const auto& v : vars) {
    std::vector<std::string> parts = absl::StrSplit(v->name(), '/');
    if (parts.size() < 2 || parts.back() != "w") continue;
    out[absl::StrCat(parts[parts.size() - 2], "/w")] = *v->Read();
  }
  return out;
}

// loss = sum(y^2): the micro-batches' losses add up to the whole input's, so
// one update of plain gradient descent with summed gradients equals one
// step on the host over all the rows.
Output SumOfSquares(const Scope& s, Output y) {
  return ops::ReduceSum(s, ops::Square(s, y));
}
constexpr float kLearningRate = 1e-3f;

std::map<std::string, Tensor> TrainHost(const BlockModel& model,
                                        const Tensor& x) {
  Scope s = Scope::NewRootScope();
  Output in = ops::Placeholder(s, DType::kFloat32, x.shape());
  Output loss = SumOfSquares(s, model.Apply(s, {in})[0]);
  optimizers::GradientDescentOptimizer opt(kLearningRate);
  Node* train = opt.Minimize(s, loss);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  std::vector<Tensor> none;
  absl::Status st = session.Run({{in, x}}, {}, {train}, &none);
  EXPECT_TRUE(st.ok()) << st;
  return ByBlock(session.resources()->variables());
}

absl::StatusOr<std::map<std::string, Tensor>> TrainPipelined(
    const BlockModel& model, const ExecutionStrategy& strategy,
    const Tensor& x) {
  std::unique_ptr<IPUSystem> system = OneReplicaOnFourIpus();
  ASSIGN_OR_RETURN(auto infeed, MicroBatchInfeed(x));
  PipelineOptions o;
  RETURN_IF_ERROR(ApplyStrategy(model, strategy, &o));
  o.gradient_accumulation_count = kMicroBatches;
  o.infeed_queue = infeed.get();
  o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientDescentOptimizer>(kLearningRate),
        SumOfSquares(s, out[0])};
  };
  Scope scope = Scope::NewRootScope();
  ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(scope, o));
  IPUStrategy ipu(system.get());
  RETURN_IF_ERROR(ipu.Initialize(*scope.graph()));
  RETURN_IF_ERROR(
      ::ipuflow::pipelining::testing::RunPipeline(ipu, *pipeline).status());
  std::map<std::string, Tensor> vars;
  for (int k = 0; k < system->num_ipus(); ++k) {
    vars.merge(ByBlock(system->device(k).resources()->variables()));
  }
  return vars;
}

void TrainAndCompare(const BlockModel& model,
                     const ExecutionStrategy& strategy) {
  const Tensor x = Inputs();
  absl::StatusOr<std::map<std::string, Tensor>> trained =
      TrainPipelined(model, strategy, x);
  ASSERT_TRUE(trained.ok()) << trained.status();
  std::map<std::string, Tensor> host = TrainHost(model, x);
  ASSERT_EQ(trained->size(), static_cast<size_t>(model.size()));
  ASSERT_EQ(host.size(), trained->size());
  for (const auto& [name, value] : host) {
    ASSERT_TRUE(trained->count(name)) << name;
    EXPECT_TRUE(TensorNear(trained->at(name), value, 1e-5, 1e-4)) << name;
  }
  // The weights moved: B1's changed by more than the tolerance.
  Scope s = Scope::NewRootScope();
  model.Apply(s, {ops::Placeholder(s, DType::kFloat32, x.shape())});
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::map<std::string, Tensor> init =
      ByBlock(session.resources()->variables());
  EXPECT_FALSE(TensorNear(host.at("B1/w"), init.at("B1/w"), 1e-3, 0));
}

TEST(ExecutionStrategyTrainingTest, Sharded) {
  TrainAndCompare(Mlp(), ShardedExecution("B1", "B2", "B3", "B4"));
}

TEST(ExecutionStrategyTrainingTest, PipelinedWithConcurrentStage) {
  // Grouped training, 3 stages (gradient_accumulation_count 12 = 2 x 6).
  TrainAndCompare(Branched({0, 1, 2, 3}), PipelinedExecution());
}

TEST(ExecutionStrategyTrainingTest, SerialPhasedWithParallelStages) {
  TrainAndCompare(
      Branched(),
      SerialPhasedExecution(Stage("B1"),
                            Phase(Stage("B2a"), Stage("B2b")).Ipus({1, 2}),
                            Stage("B3").Ipu(3)));
}

// -------------------------------------------------------------------- Errors

TEST(ExecutionStrategyErrorTest, UnknownBlocksAndBlocksInNoStage) {
  // Reported together, one line each.
  std::string e = PlanError(Mlp(), PipelinedExecution("B1", "B5", "X"));
  EXPECT_THAT(e, HasSubstr("Invalid execution strategy (PipelinedExecution, "
                           "blocks [B1, B2, B3, B4]):"));
  EXPECT_THAT(e, HasSubstr("\n  Unknown Block 'B5'; list of expected Blocks: "
                           "[B1, B2, B3, B4]"));
  EXPECT_THAT(e, HasSubstr("\n  Unknown Block 'X'; list of expected Blocks"));
  EXPECT_THAT(e, HasSubstr("\n  Blocks [B2, B3, B4] are in no stage: every "
                           "block must be in exactly one stage"));
  EXPECT_THAT(PlanError(Mlp(), PipelinedExecution("B1", "B2", "B3")),
              HasSubstr("Block 'B4' is in no stage"));
}

TEST(ExecutionStrategyErrorTest, BlockInTwoStages) {
  std::string e = PlanError(
      Mlp(), PipelinedExecution(Stage("B1", "B2"), Stage("B2", "B3"), "B4"));
  EXPECT_THAT(e, HasSubstr("Block 'B2' is associated with more than one "
                           "stage: stage 0 [B1, B2] and stage 1 [B2, B3]"));
  EXPECT_THAT(
      PlanError(Mlp(), PipelinedExecution(Stage("B1", "B1"), "B2", "B3", "B4")),
      HasSubstr("Block 'B1' is listed twice in stage 0 [B1, B1]"));
}

TEST(ExecutionStrategyErrorTest, NonConsecutiveAndOutOfOrderStages) {
  std::string e = PlanError(
      Mlp(), PipelinedExecution(Stage("B1", "B3"), Stage("B2", "B4")));
  EXPECT_THAT(e, HasSubstr("stage 0 [B1, B3] holds blocks that are not "
                           "consecutive: the model runs 'B2' between 'B1' "
                           "and 'B3'"));
  EXPECT_THAT(e, HasSubstr("stage 1 [B2, B4] holds blocks that are not "
                           "consecutive: the model runs 'B3' between 'B2' "
                           "and 'B4'"));
  e = PlanError(Mlp(), ShardedExecution(Stage("B3", "B4"), Stage("B1", "B2")));
  EXPECT_THAT(e, HasSubstr("(ShardedExecution, "));
  EXPECT_THAT(e, HasSubstr("stage 1 [B1, B2] comes after stage 0 [B3, B4], "
                           "but the model runs it first: list the stages in "
                           "model order"));
}

TEST(ExecutionStrategyErrorTest, AutoStageSameAsIpu) {
  // Every block without an IPU is named.
  std::string e = PlanError(Mlp({0, {}, 1, {}}), PipelinedExecution());
  EXPECT_THAT(e, HasSubstr("AutoStage.SameAsIpu was selected but no IPU was "
                           "specified for block 'B2'"));
  EXPECT_THAT(e, HasSubstr("AutoStage.SameAsIpu was selected but no IPU was "
                           "specified for block 'B4'"));
  EXPECT_THAT(e, ::testing::Not(HasSubstr("block 'B1'")));
  e = PlanError(Mlp({0, 1, 0, 1}), ShardedExecution(AutoStage::kSameAsIpu));
  EXPECT_THAT(e, HasSubstr("AutoStage.SameAsIpu: block 'B3' goes back to IPU "
                           "0 after block 'B2' on IPU 1, but the stage id is "
                           "the IPU id: use AutoStage::kAutoIncrement"));
  EXPECT_THAT(e, HasSubstr("block 'B4' goes back to IPU 1"));
}

TEST(ExecutionStrategyErrorTest, StageIpus) {
  std::string e =
      PlanError(Mlp({0, 1, 2, 2}),
                PipelinedExecution(Stage("B1", "B2"), Stage("B3", "B4")));
  EXPECT_THAT(e, HasSubstr("stage 0 [B1, B2] holds blocks on different IPUs "
                           "(B1 on IPU 0, B2 on IPU 1): set the stage's IPU "
                           "with Stage::Ipu or split the stage"));
  EXPECT_THAT(PlanError(Mlp(), PipelinedExecution(Stage("B1", "B2").Ipu(-2),
                                                  Stage("B3", "B4"))),
              HasSubstr("stage 0 [B1, B2]: IPU -2 is negative"));
}

TEST(ExecutionStrategyErrorTest, Phases) {
  EXPECT_THAT(PlanError(Mlp(), SerialPhasedExecution()),
              HasSubstr("There is currently no AutoStage for "
                        "SerialPhasedExecution, please explicitly specify "
                        "the phases"));
  std::string e = PlanError(
      Branched(),
      SerialPhasedExecution(Phase(), Phase(Stage("B1"), Stage("B2a", "B2b")),
                            Phase(Stage("B3")).Ipus({0, 1})));
  EXPECT_THAT(e, HasSubstr("(SerialPhasedExecution, blocks [B1, B2a, B2b, "
                           "B3]):"));
  EXPECT_THAT(e, HasSubstr("\n  Phase 0 has no stage"));
  EXPECT_THAT(e, HasSubstr("\n  Phase 2 contains 1 stages but you provided 2 "
                           "IPUs"));
}

TEST(ExecutionStrategyErrorTest, PhaseWithDependentStages) {
  // Every bad phase is reported.
  std::string e =
      PlanError(Mlp(), SerialPhasedExecution(Phase(Stage("B1"), Stage("B2")),
                                             Phase(Stage("B3"), Stage("B4"))));
  EXPECT_THAT(e, HasSubstr("Phase 0 has 2 stages, but block 'B2' receives the "
                           "outputs of block 'B1': the stages of a phase run "
                           "in parallel on the same arguments, so they must "
                           "hold the blocks of one parallel group "
                           "(BlockModel::AddParallel)"));
  EXPECT_THAT(e, HasSubstr("Phase 1 has 2 stages, but block 'B4' receives the "
                           "outputs of block 'B3'"));
}

TEST(ExecutionStrategyErrorTest, SplitParallelGroups) {
  // B2a and B2b in different phases.
  std::string e =
      PlanError(Branched(), SerialPhasedExecution("B1", "B2a", "B2b", "B3"));
  EXPECT_THAT(e, HasSubstr("stage 0 of phase 1 [B2a] splits the parallel "
                           "blocks [B2a, B2b]: a stage holds whole parallel "
                           "groups, or blocks of one group whose other blocks "
                           "are in the stages next to it in the same phase"));
  // A stage reaching into a parallel group from outside.
  e = PlanError(Branched(),
                PipelinedExecution(Stage("B1", "B2a"), Stage("B2b", "B3")));
  EXPECT_THAT(e, HasSubstr("stage 0 [B1, B2a] splits the parallel blocks "
                           "[B2a, B2b]"));
  e = PlanError(Branched({0, 0, 1, 1}), PipelinedExecution());
  EXPECT_THAT(e, HasSubstr("stage 0 [B1, B2a] splits the parallel blocks"));
}

TEST(ExecutionStrategyErrorTest, EmptyModelAndEmptyStage) {
  EXPECT_THAT(PlanError(BlockModel(), PipelinedExecution("B1")),
              HasSubstr("the model has no blocks"));
  std::string e = PlanError(
      Mlp(), PipelinedExecution(Stage(), "B1", "B2", Stage("B3", "B4")));
  EXPECT_THAT(e, HasSubstr("stage 0 [] has no block"));
}

}  // namespace
}  // namespace ipuflow::pipelining
