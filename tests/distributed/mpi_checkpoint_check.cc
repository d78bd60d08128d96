// Run under `mpirun -np P` (//tests/distributed:mpi_checkpoint_test):
// checkpoints of a multi-process run (docs/CHECKPOINTS.md, "More than one
// process"). P processes x 2 replicas train a device loop with float16
// weights and float32 masters, stochastic rounding (the replicas' weights
// differ), dropout, cross-replica Adam with gradient accumulation, loss
// scaling and an Async DataLoader with 2 workers shuffling its process's
// block (and again with Adam's state offloaded and sharded over every
// process's replicas); stopped after k weight updates, saved (process 0's
// shared file, every process's part) and resumed in fresh IPU systems, the
// weights and the loss curve are bitwise the uninterrupted run's. Then
// keep-last-K removes every part, a part that cannot be written leaves the
// previous checkpoint the newest on every process, and another process count or
// replicas per process is refused naming both values.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/training_state.h"
#include "core/distributed/mpi_link.h"
#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "feeds/outfeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/control/loops.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/math/sub.h"
#include "ops/nn/ipu_dropout.h"
#include "ops/state/random.h"
#include "ops/state/variable.h"
#include "optimizers/adam.h"
#include "optimizers/gradient_accumulation.h"
#include "optimizers/loss_scaling.h"

namespace ipuflow::checkpoint {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSamples = 96;
constexpr int64_t kBatch = 2;
constexpr int kAccumulation = 2;

std::shared_ptr<distributed::MpiLink> Link() {
  static std::shared_ptr<distributed::MpiLink> link =
      *distributed::MpiLink::World();
  return link;
}

// Every process waits for the others (a test's own meeting).
void Barrier(uint64_t tag) {
  auto all = Link()->AllGatherStrings(0x7E570000 + tag, "");
  ASSERT_TRUE(all.ok()) << all.status();
}

// A directory every process sees, emptied by process 0.
std::string SharedDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/mpi_ckpt_",
                                       Link()->process_count(), "_", name);
  if (Link()->process_index() == 0) std::filesystem::remove_all(dir);
  Barrier(1);
  return dir;
}

// Sample i: x = 4 features of i, y = a target of i, id = i.
feeds::DatasetPtr Samples() {
  std::vector<float> x, y;
  std::vector<int32_t> id;
  for (int i = 0; i < kSamples; ++i) {
    x.insert(x.end(), {std::sin(0.7f * i), 0.5f * std::cos(1.3f * i),
                       static_cast<float>(i % 7) / 7, 1});
    y.push_back(std::cos(0.3f * i));
    id.push_back(i);
  }
  return feeds::FromTensorSlices({Tensor::FromVector(x, {kSamples, 4}),
                                  Tensor::FromVector(y, {kSamples}),
                                  Tensor::FromVector(id, {kSamples})});
}

struct RunConfig {
  int replicas = 2;  // Local.
  bool linked = true;
  bool restore = true;  // With a checkpoint: restore it (else only the input).
  bool offload_sharded = false;  // Adam's state in remote memory, sharded.
};

// One training run of this process, from scratch or from a checkpoint (the
// input first, then Restore after Initialize).
class TrainingRun {
 public:
  TrainingRun(const RunConfig& cfg, const CheckpointContents* resume)
      : adam_(0.01f),
        ga_(&adam_, kAccumulation,
            optimizers::GradientAccumulationReductionMethod::kSum,
            optimizers::ReplicaReduction::kMean, {}, WeightUpdate(cfg)),
        ls_(&ga_, optimizers::LossScaling::GradScaler(Scaler())) {
    adam_.set_master_weights(true);
    IPUConfig config;
    config.set_auto_select_ipus(cfg.replicas);
    config.set_replication_factor(cfg.replicas);
    config.set_seed(1234);
    config.mutable_floating_point_behaviour()->set_esr(
        FloatingPointBehaviourConfig::ON);
    system_ = std::move(IPUSystem::Create(config)).value();
    if (cfg.linked) {
      status_ = system_->SetProcessLink(Link());
      if (!status_.ok()) return;
    }
    feeds::DataLoaderOptions o;
    o.batch_size = kBatch;
    o.replicas = cfg.replicas;
    o.gradient_accumulation = kAccumulation;
    o.shuffle = true;
    o.seed = 99;
    o.mode = feeds::DataLoaderMode::kAsync;
    o.num_workers = 2;
    if (cfg.linked) {
      o.process_index = Link()->process_index();
      o.process_count = Link()->process_count();
    }
    if (resume != nullptr) {
      auto l = ResumeDataLoader(*resume, "train", Samples(), o);
      status_ = l.status();
      if (!l.ok()) return;
      loader_ = *std::move(l);
    } else {
      loader_ = std::move(feeds::DataLoader::Create(Samples(), o)).value();
    }
    infeed_ =
        std::move(feeds::IPUInfeedQueue::Create(
                      std::move(loader_->ToInfeedDataset()).value()->Repeat()))
            .value();
    outfeed_ = std::move(feeds::IPUOutfeedQueue::Create()).value();
    Scope s = Scope::NewRootScope();
    graph_ = s.graph();
    scope_ = std::make_unique<Scope>(s);
    auto w = ops::Variable(
        s.WithOpName("w"),
        ops::Cast(s, ops::RandomUniform(s, {4, 3}, -0.5f, 0.5f, 11),
                  DType::kFloat16));
    auto loop = loops::Repeat(
        s, kAccumulation,
        [&](const Scope& b, const std::vector<Output>& args) {
          Output h =
              ops::MatMul(b, ops::Cast(b, args[0], DType::kFloat16), w.value);
          Output d = ops::IpuDropout(b, h, 0.25f, 5).output;
          Output pred =
              ops::ReduceSum(b, ops::Cast(b, d, DType::kFloat32), {1});
          Output loss =
              ops::ReduceMean(b, ops::Square(b, ops::Sub(b, pred, args[1])));
          ls_.Minimize(b, loss);
          outfeed_->Enqueue(b, {{"loss", loss}});
          return std::vector<Output>{};
        },
        {}, infeed_.get());
    status_ = loop.status();
    if (!status_.ok()) return;
    strategy_ = std::make_unique<IPUStrategy>(system_.get());
    auto exe = strategy_->Compile(*graph_, {}, {loop->op});
    status_ = exe.status();
    if (!status_.ok()) return;
    exe_ = *exe;
    status_ = strategy_->Initialize(*graph_);
    if (!status_.ok()) return;
    ckpt_ = std::make_unique<TrainingCheckpoint>(graph_, exe_);
    ckpt_->AddInfeed("train", infeed_.get(), loader_.get());
    if (resume != nullptr && cfg.restore) status_ = ckpt_->Restore(*resume);
  }

  ~TrainingRun() { strategy_.reset(); }

  const absl::Status& status() const { return status_; }
  TrainingCheckpoint& ckpt() { return *ckpt_; }

  // n weight updates; appends each one's losses.
  absl::Status Train(int n) {
    for (int i = 0; i < n; ++i) {
      std::vector<std::vector<Tensor>> results;
      RETURN_IF_ERROR(exe_->Execute({{}}, &results));
      ASSIGN_OR_RETURN(feeds::OutfeedResult r, outfeed_->Dequeue());
      const Tensor& loss = r["loss"];
      losses.insert(losses.end(), loss.data<float>(),
                    loss.data<float>() + loss.NumElements());
    }
    return absl::OkStatus();
  }

  std::map<std::string, std::vector<Tensor>> Variables() {
    return std::move(exe_->ReadVariables(".*")).value();
  }

  std::vector<float> losses;

 private:
  static optimizers::WeightUpdateOptions WeightUpdate(const RunConfig& cfg) {
    optimizers::WeightUpdateOptions o;
    o.offload_weight_update_variables = cfg.offload_sharded;
    o.replicated_optimizer_state_sharding = cfg.offload_sharded;
    return o;
  }
  static optimizers::GradScalerSettings Scaler() {
    optimizers::GradScalerSettings g;
    g.init_scale = 256;
    g.growth_interval = 2;
    return g;
  }

  optimizers::AdamOptimizer adam_;
  optimizers::CrossReplicaGradientAccumulationOptimizerV2 ga_;
  optimizers::LossScalingOptimizer ls_;
  std::unique_ptr<IPUSystem> system_;
  std::unique_ptr<feeds::DataLoader> loader_;
  std::unique_ptr<feeds::IPUInfeedQueue> infeed_;
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed_;
  Graph* graph_ = nullptr;
  std::unique_ptr<Scope> scope_;
  std::unique_ptr<IPUStrategy> strategy_;
  DeviceProgram* exe_ = nullptr;
  std::unique_ptr<TrainingCheckpoint> ckpt_;
  absl::Status status_;
};

void ExpectBitwise(const std::map<std::string, std::vector<Tensor>>& a,
                   const std::map<std::string, std::vector<Tensor>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, per] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    const auto& other = b.at(name);
    ASSERT_EQ(per.size(), other.size()) << name;
    for (size_t r = 0; r < per.size(); ++r) {
      ASSERT_EQ(per[r].TotalBytes(), other[r].TotalBytes()) << name;
      EXPECT_EQ(std::memcmp(per[r].raw_data(), other[r].raw_data(),
                            per[r].TotalBytes()),
                0)
          << "process " << Link()->process_index() << ": variable " << name
          << " replica " << r;
    }
  }
}

absl::StatusOr<CheckpointContents> ReadNewest(const std::string& dir) {
  ASSIGN_OR_RETURN(std::string path, LatestCheckpoint(dir));
  return ReadCheckpoint(path, Link()->process_index(), Link()->process_count());
}

// Weight updates per epoch of one process's block: its 96 / P samples in
// steps of 2 replicas x 2 micro-batches x 2 samples.
int UpdatesPerEpoch() {
  return static_cast<int>(kSamples / Link()->process_count() /
                          (2 * kAccumulation * kBatch));
}

void ExpectExactResume(const RunConfig& cfg) {
  const int per_epoch = UpdatesPerEpoch();
  const int total = 2 * per_epoch + 1;
  TrainingRun whole(cfg, nullptr);
  ASSERT_TRUE(whole.status().ok()) << whole.status();
  ASSERT_TRUE(whole.Train(total).ok());
  const auto final_vars = whole.Variables();
  EXPECT_NE(whole.losses.front(), whole.losses.back());
  // The replicas' float16 weights differ (stochastic rounding): saved per
  // replica, in each process's part.
  const auto& w = final_vars.at("w");
  EXPECT_NE(std::memcmp(w[0].raw_data(), w[1].raw_data(), w[0].TotalBytes()),
            0);

  // The first update, mid-epoch, the epoch's last and the next's first.
  for (int k : {1, per_epoch / 2, per_epoch, per_epoch + 1}) {
    SCOPED_TRACE(absl::StrCat("k = ", k));
    const std::string dir =
        SharedDir(absl::StrCat("exact_", cfg.offload_sharded, "_", k));
    std::vector<float> losses;
    {
      TrainingRun first(cfg, nullptr);
      ASSERT_TRUE(first.status().ok()) << first.status();
      ASSERT_TRUE(first.Train(k).ok());
      auto saved = first.ckpt().Save(dir, k);
      ASSERT_TRUE(saved.ok()) << saved.status();
      losses = first.losses;
    }  // The first run, its IPU system included, is gone.
    auto c = ReadNewest(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->manifest.steps().weight_updates(), k);
    EXPECT_EQ(c->manifest.topology().processes(), Link()->process_count());
    EXPECT_EQ(c->manifest.loaders(0).epoch(), k / per_epoch);
    bool per_replica = false, shared = false;
    for (const TensorEntry& e : c->manifest.tensors()) {
      per_replica |= e.replica() >= 0;
      shared |= e.replica() < 0;
      if (e.replica() >= 0) {
        EXPECT_EQ(e.replica() / 2, Link()->process_index()) << e.name();
      }
    }
    EXPECT_TRUE(per_replica && shared);
    TrainingRun second(cfg, &*c);
    ASSERT_TRUE(second.status().ok()) << second.status();
    ASSERT_TRUE(second.Train(total - k).ok());
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    ASSERT_EQ(losses.size(), whole.losses.size());
    EXPECT_EQ(std::memcmp(losses.data(), whole.losses.data(),
                          losses.size() * sizeof(float)),
              0)
        << "process " << Link()->process_index() << ": loss curves differ";
    ExpectBitwise(second.Variables(), final_vars);
  }
}

TEST(MpiCheckpointTest, StoppedAfterKUpdatesContinuesBitwise) {
  ExpectExactResume(RunConfig{});
}

// Adam's state offloaded to remote memory and sharded over the global
// replicas (ZeRO-1 across the processes).
TEST(MpiCheckpointTest, OffloadedShardedStateContinuesBitwise) {
  RunConfig cfg;
  cfg.offload_sharded = true;
  ExpectExactResume(cfg);
}

// The files of `dir`, sorted.
std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// keep_last = 2 keeps two checkpoints with all their parts; a part that
// cannot be written (a directory where process P-1's part goes) fails the
// save on every process, and the previous checkpoint stays the newest and
// loads; its stale parts go with the next save.
TEST(MpiCheckpointTest, KeepLastRemovesPartsAndAFailedPartCommitsNothing) {
  const int me = Link()->process_index(), P = Link()->process_count();
  const std::string dir = SharedDir("keep");
  TrainingRun run(RunConfig{}, nullptr);
  ASSERT_TRUE(run.status().ok()) << run.status();
  for (int step = 1; step <= 3; ++step) {
    ASSERT_TRUE(run.Train(1).ok());
    ASSERT_TRUE(run.ckpt().Save(dir, step, /*keep_last=*/2).ok());
  }
  Barrier(2);
  std::vector<std::string> want;
  for (int step : {2, 3}) {
    want.push_back(NumberedCheckpointPath("", step).substr(1));
    for (int p = 0; p < P; ++p) {
      want.push_back(ProcessPartPath("", step, p, P).substr(1));
    }
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Files(dir), want);
  Barrier(3);

  if (me == P - 1) {
    std::filesystem::create_directories(ProcessPartPath(dir, 4, me, P));
  }
  Barrier(4);
  ASSERT_TRUE(run.Train(1).ok());
  absl::StatusOr<std::string> failed = run.ckpt().Save(dir, 4, 2);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(),
              HasSubstr(absl::StrCat("process ", P - 1,
                                     " could not write its part of "
                                     "checkpoint 4 (the previous checkpoint "
                                     "stays the newest)")));
  auto newest = LatestCheckpoint(dir);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(*newest, NumberedCheckpointPath(dir, 3));
  auto c = ReadCheckpoint(*newest, me, P);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->manifest.steps().weight_updates(), 3);
  Barrier(5);
  if (me == P - 1) std::filesystem::remove(ProcessPartPath(dir, 4, me, P));
  Barrier(6);
  ASSERT_TRUE(run.Train(1).ok());
  ASSERT_TRUE(run.ckpt().Save(dir, 5, /*keep_last=*/1).ok());
  Barrier(7);
  want = {NumberedCheckpointPath("", 5).substr(1)};
  for (int p = 0; p < P; ++p) {
    want.push_back(ProcessPartPath("", 5, p, P).substr(1));
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Files(dir), want) << "the failed step's parts are gone too";
  Barrier(8);
}

TEST(MpiCheckpointTest, AnotherProcessCountOrTopologyIsRefused) {
  const int me = Link()->process_index(), P = Link()->process_count();
  const std::string dir = SharedDir("refusals");
  {
    TrainingRun run(RunConfig{}, nullptr);
    ASSERT_TRUE(run.status().ok()) << run.status();
    ASSERT_TRUE(run.Train(1).ok());
    ASSERT_TRUE(run.ckpt().Save(dir, 1).ok());
  }
  const std::string path = NumberedCheckpointPath(dir, 1);
  if (P >= 2) {
    // Processes that save different steps: every one refuses, nothing is
    // written.
    TrainingRun run(RunConfig{}, nullptr);
    ASSERT_TRUE(run.status().ok()) << run.status();
    ASSERT_TRUE(run.Train(1).ok());
    auto s = run.ckpt().Save(dir, me == 1 ? 3 : 2);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.status().message(),
                HasSubstr("every process saves the same step"));
    EXPECT_EQ(*LatestCheckpoint(dir), path);
  }
  // Read by another process count: refused, naming both.
  auto other = ReadCheckpoint(path, 0, P + 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(),
              HasSubstr(absl::StrCat("saved by ", P,
                                     " process(es); this run has ", P + 1)));
  // Read by one process (no part): the same.
  auto single = ReadCheckpoint(path);
  EXPECT_THAT(
      single.status().message(),
      HasSubstr(absl::StrCat("saved by ", P, " process(es); this run has 1")));
  // Restored into 1 replica per process: refused on every process.
  auto c = ReadCheckpoint(path, me, P);
  ASSERT_TRUE(c.ok()) << c.status();
  {
    RunConfig one;
    one.replicas = 1;
    TrainingRun fresh(one, nullptr);
    ASSERT_TRUE(fresh.status().ok()) << fresh.status();
    const auto before = fresh.Variables();
    absl::Status s = fresh.ckpt().Restore(*c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("the checkpoint has ", 2 * P,
                                       " replicas (2 per process), this run ",
                                       P, " (1 per process)")));
    ExpectBitwise(fresh.Variables(), before);
  }
  // Another process's part: every process refuses (process 0 is told by
  // process 1's refusal).
  if (P >= 2) {
    auto mine = ReadCheckpoint(path, me, P);
    ASSERT_TRUE(mine.ok());
    RunConfig input_only;
    input_only.restore = false;
    TrainingRun fresh(input_only, &*mine);
    ASSERT_TRUE(fresh.status().ok()) << fresh.status();
    if (me == 1) mine->manifest.mutable_part()->set_process(0);
    absl::Status s = fresh.ckpt().Restore(*mine);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr(me == 1 ? "this is process 1 of"
                                               : "process 1 refused its part"));
  }
  // A single-process checkpoint into this multi-process run.
  const std::string solo = absl::StrCat(dir, "_solo_", me);
  {
    RunConfig unlinked;
    unlinked.linked = false;
    TrainingRun run(unlinked, nullptr);
    ASSERT_TRUE(run.status().ok()) << run.status();
    ASSERT_TRUE(run.Train(1).ok());
    ASSERT_TRUE(run.ckpt().Save(solo, 1).ok());
  }
  auto s1 = ReadCheckpoint(NumberedCheckpointPath(solo, 1), me, P);
  EXPECT_THAT(
      s1.status().message(),
      HasSubstr(absl::StrCat("saved by 1 process(es); this run has ", P)));
  // A missing part: that process's read fails (DataLoss, naming it).
  Barrier(9);
  if (me == 0) std::filesystem::remove(ProcessPartPath(dir, 1, P - 1, P));
  Barrier(10);
  auto lost = ReadCheckpoint(path, me, P);
  if (me == P - 1) {
    EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(
        lost.status().message(),
        HasSubstr(absl::StrCat("the part of process ", me, " cannot be read")));
  }
  Barrier(11);
}

}  // namespace
}  // namespace ipuflow::checkpoint
