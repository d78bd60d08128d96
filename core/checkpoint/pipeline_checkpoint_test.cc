// Exact resume of a pipeline (issue 24): a 2-stage pipeline on 2 IPUs per
// replica, 2 replicas, float16 weights with float32 masters, stochastic
// rounding on every float16 result (each stage program draws from its own
// run counter), AdamW state offloaded to remote memory,
// automatic loss scaling, a shuffling Async DataLoader with 2 workers.
// Stopped after k weight updates and resumed in a fresh IPU system, it
// gives bitwise the weights and the loss curve of the uninterrupted run;
// with the stage programs' run counters zeroed it does not.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_test_model.h"
#include "core/checkpoint/training_state.h"
#include "core/half.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/test_dir.h"
#include "feeds/dataset.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/math/sub.h"
#include "ops/nn/tanh.h"
#include "ops/state/random.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"
#include "optimizers/loss_scaling.h"
#include "pipelining/pipeline.h"

namespace ipuflow::checkpoint {
namespace {

using ::ipuflow::testing::AbsentTestDir;

using ::ipuflow::checkpoint::testing::ExecuteAndRecord;
using ::ipuflow::checkpoint::testing::ExpectBitwise;
using ::ipuflow::checkpoint::testing::MakeTrainingFeeds;
using ::ipuflow::checkpoint::testing::TrainingFeeds;

constexpr int64_t kPipelineSamples = 64;
constexpr int64_t kPipelineBatch = 2;
constexpr int kReplicas = 2;
constexpr int kAccumulation = 4;  // Micro-batches per weight update.
constexpr int kUpdatesPerCall = 2;

feeds::DatasetPtr Samples() { return testing::Samples(kPipelineSamples); }

// One pipelined training run, from scratch or from a checkpoint.
class PipelineRun {
 public:
  explicit PipelineRun(const CheckpointContents* resume) {
    IPUConfig config;
    config.set_auto_select_ipus(2 * kReplicas);
    config.set_replication_factor(kReplicas);
    config.set_seed(4321);
    config.mutable_floating_point_behaviour()->set_esr(
        FloatingPointBehaviourConfig::ON);
    system_ = std::move(IPUSystem::Create(config)).value();
    feeds::DataLoaderOptions o;
    o.batch_size = kPipelineBatch;
    o.replicas = kReplicas;
    o.gradient_accumulation = kAccumulation;
    o.device_iterations = kUpdatesPerCall;
    o.shuffle = true;
    o.seed = 7;
    o.mode = feeds::DataLoaderMode::kAsync;
    o.num_workers = 2;
    absl::StatusOr<TrainingFeeds> fed = MakeTrainingFeeds(resume, Samples(), o);
    status_ = fed.status();
    if (!fed.ok()) return;
    loader_ = std::move(fed->loader);
    infeed_ = std::move(fed->infeed);
    outfeed_ = std::move(fed->outfeed);
    Scope root = Scope::NewRootScope();
    graph_ = root.graph();
    const Scope s0 = root.WithIpu(0), s1 = root.WithIpu(1);
    auto w0 = ops::Variable(
        s0.WithOpName("w0"),
        ops::Cast(s0, ops::RandomUniform(s0, {4, 8}, -0.5f, 0.5f, 11),
                  DType::kFloat16));
    auto w1 = ops::Variable(
        s1.WithOpName("w1"),
        ops::Cast(s1, ops::RandomUniform(s1, {8, 1}, -0.5f, 0.5f, 12),
                  DType::kFloat16));
    pipelining::PipelineOptions p;
    p.computational_stages = {
        [w0](const Scope& s, const std::vector<Output>& a) {
          Output h =
              ops::Tanh(s, ops::MatMul(s, ops::Cast(s, a[0], DType::kFloat16),
                                       ops::ReadVariable(s, w0.handle)));
          return std::vector<Output>{h, a[1], a[2]};
        },
        [w1](const Scope& s, const std::vector<Output>& a) {
          Output pred = ops::ReduceSum(
              s,
              ops::Cast(s,
                        ops::MatMul(s, a[0], ops::ReadVariable(s, w1.handle)),
                        DType::kFloat32),
              {1});
          Output loss =
              ops::ReduceMean(s, ops::Square(s, ops::Sub(s, pred, a[1])));
          return std::vector<Output>{loss, a[2]};
        }};
    p.gradient_accumulation_count = kAccumulation;
    p.repeat_count = kUpdatesPerCall;
    p.reduction_method = pipelining::ReductionMethod::kMean;
    p.gradient_accumulation_dtype = DType::kFloat32;
    p.infeed_queue = infeed_.get();
    p.outfeed_queue = outfeed_.get();
    p.offload_weight_update_variables = true;
    p.optimizer_function = [](const Scope&, const std::vector<Output>& out) {
      auto adamw = std::make_shared<optimizers::AdamWOptimizer>(0.01f);
      adamw->set_master_weights(true);
      std::shared_ptr<optimizers::Optimizer> opt =
          std::make_shared<optimizers::LossScalingOptimizer>(
              std::make_shared<optimizers::CrossReplicaOptimizer>(adamw),
              optimizers::LossScaling::Automatic(128.f));
      return pipelining::OptimizerFunctionOutput{opt, out[0]};
    };
    auto pipeline = pipelining::Pipeline::Create(root, std::move(p));
    status_ = pipeline.status();
    if (!status_.ok()) return;
    pipeline_ = *std::move(pipeline);
    strategy_ = std::make_unique<IPUStrategy>(system_.get());
    auto exe = strategy_->Compile(*graph_, {}, {pipeline_->frame()});
    status_ = exe.status();
    if (!status_.ok()) return;
    exe_ = *exe;
    status_ = strategy_->Initialize(*graph_);
    if (!status_.ok()) return;
    ckpt_ = std::make_unique<TrainingCheckpoint>(graph_, exe_);
    if (resume != nullptr) status_ = ckpt_->Restore(*resume);
  }
  ~PipelineRun() { strategy_.reset(); }

  const absl::Status& status() const { return status_; }
  TrainingCheckpoint& ckpt() { return *ckpt_; }

  // `calls` training calls of kUpdatesPerCall weight updates; appends the
  // losses of each micro-batch (replica by replica) and the sample ids.
  absl::Status Train(int calls) {
    for (int c = 0; c < calls; ++c) {
      RETURN_IF_ERROR(
          ExecuteAndRecord(exe_, outfeed_.get(), "0", "1", &losses, &ids));
    }
    return absl::OkStatus();
  }

  std::map<std::string, std::vector<Tensor>> Variables() {
    return std::move(exe_->ReadVariables(".*")).value();
  }

  std::vector<float> losses;
  std::vector<int32_t> ids;

 private:
  std::unique_ptr<IPUSystem> system_;
  std::unique_ptr<feeds::DataLoader> loader_;
  std::unique_ptr<feeds::IPUInfeedQueue> infeed_;
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed_;
  Graph* graph_ = nullptr;
  std::unique_ptr<pipelining::Pipeline> pipeline_;
  std::unique_ptr<IPUStrategy> strategy_;
  DeviceProgram* exe_ = nullptr;
  std::unique_ptr<TrainingCheckpoint> ckpt_;
  absl::Status status_;
};

// 6 calls of 2 weight updates; a call takes 32 samples: 2 calls per epoch.
constexpr int kCalls = 6;

TEST(PipelineResumeTest, StoppedAfterKUpdatesContinuesBitwise) {
  PipelineRun whole(nullptr);
  ASSERT_TRUE(whole.status().ok()) << whole.status();
  ASSERT_TRUE(whole.Train(kCalls).ok());
  const auto final_vars = whole.Variables();
  ASSERT_EQ(whole.losses.size(),
            static_cast<size_t>(kCalls * kUpdatesPerCall * kAccumulation *
                                kReplicas));
  EXPECT_NE(whole.losses.front(), whole.losses.back());
  // k = 2 (the first call), 6 (mid-epoch 1), 8 (the end of epoch 1), 10.
  for (int calls : {1, 3, 4, 5}) {
    const int k = calls * kUpdatesPerCall;
    SCOPED_TRACE(absl::StrCat("k = ", k));
    const std::string dir = AbsentTestDir(absl::StrCat("pipeline_", k));
    std::string path;
    std::vector<float> losses;
    {
      PipelineRun first(nullptr);
      ASSERT_TRUE(first.status().ok()) << first.status();
      ASSERT_TRUE(first.Train(calls).ok());
      auto saved = first.ckpt().Save(dir, k);
      ASSERT_TRUE(saved.ok()) << saved.status();
      path = *saved;
      losses = first.losses;
    }
    auto c = ReadCheckpointFile(path);
    ASSERT_TRUE(c.ok()) << c.status();
    PipelineRun second(&*c);
    ASSERT_TRUE(second.status().ok()) << second.status();
    ASSERT_TRUE(second.Train(kCalls - calls).ok());
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    ASSERT_EQ(losses.size(), whole.losses.size());
    EXPECT_EQ(std::memcmp(losses.data(), whole.losses.data(),
                          losses.size() * sizeof(float)),
              0)
        << "loss curves differ";
    ExpectBitwise(second.Variables(), final_vars, "final weights");
  }
}

// The stage programs' run counters are saved (their keys name the
// pipeline's frame node) and are what makes the resume exact.
TEST(PipelineResumeTest, StageRunCountersAreWhatMakesItExact) {
  PipelineRun whole(nullptr);
  ASSERT_TRUE(whole.Train(4).ok());
  PipelineRun first(nullptr);
  ASSERT_TRUE(first.Train(2).ok());
  auto c = first.ckpt().Capture(4);
  ASSERT_TRUE(c.ok()) << c.status();
  int stage_counters = 0;
  for (ProgramRuns& p : *c->manifest.mutable_random()->mutable_programs()) {
    if (p.key().find("stage") == std::string::npos) continue;
    ++stage_counters;
    EXPECT_GT(p.runs(), 0u) << p.key();
    p.set_runs(0);  // As if they had not been saved.
  }
  EXPECT_GT(stage_counters, 0);
  PipelineRun second(&*c);
  ASSERT_TRUE(second.status().ok()) << second.status();
  ASSERT_TRUE(second.Train(2).ok());
  const size_t half = whole.losses.size() / 2;
  ASSERT_EQ(second.losses.size(), half);
  EXPECT_NE(std::memcmp(second.losses.data(), whole.losses.data() + half,
                        half * sizeof(float)),
            0);
}

}  // namespace
}  // namespace ipuflow::checkpoint
