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
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_test_model.h"
#include "core/checkpoint/training_state.h"
#include "core/distributed/mpi_link.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::checkpoint {
namespace {

using ::ipuflow::checkpoint::testing::ExpectBitwise;
using ::ipuflow::checkpoint::testing::kBatch;
using ::ipuflow::checkpoint::testing::RunConfig;
using ::ipuflow::checkpoint::testing::TrainingRun;
using ::testing::HasSubstr;

constexpr int64_t kSamples = 96;
constexpr int kAccumulation = 2;  // RunConfig::accumulation by default.

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

// This process's run of the P-process run: 2 replicas, its share of 96
// samples, Adam's state on the IPUs.
RunConfig Config() {
  RunConfig cfg;
  cfg.samples = kSamples;
  cfg.offload_sharded = false;
  cfg.link = Link();
  return cfg;
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
    ExpectBitwise(second.Variables(), final_vars,
                  absl::StrCat("process ", Link()->process_index()));
  }
}

TEST(MpiCheckpointTest, StoppedAfterKUpdatesContinuesBitwise) {
  ExpectExactResume(Config());
}

// Adam's state offloaded to remote memory and sharded over the global
// replicas (ZeRO-1 across the processes).
TEST(MpiCheckpointTest, OffloadedShardedStateContinuesBitwise) {
  RunConfig cfg = Config();
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
  TrainingRun run(Config(), nullptr);
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
    TrainingRun run(Config(), nullptr);
    ASSERT_TRUE(run.status().ok()) << run.status();
    ASSERT_TRUE(run.Train(1).ok());
    ASSERT_TRUE(run.ckpt().Save(dir, 1).ok());
  }
  const std::string path = NumberedCheckpointPath(dir, 1);
  if (P >= 2) {
    // Processes that save different steps: every one refuses, nothing is
    // written.
    TrainingRun run(Config(), nullptr);
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
    RunConfig one = Config();
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
    ExpectBitwise(fresh.Variables(), before,
                  absl::StrCat("process ", Link()->process_index()));
  }
  // Another process's part: every process refuses (process 0 is told by
  // process 1's refusal).
  if (P >= 2) {
    auto mine = ReadCheckpoint(path, me, P);
    ASSERT_TRUE(mine.ok());
    RunConfig input_only = Config();
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
  // Emptied: mpirun_test.sh runs this binary several times in one
  // TEST_TMPDIR, and a new run may not save into an earlier run's directory.
  const std::string solo = absl::StrCat(dir, "_solo_", me);
  std::filesystem::remove_all(solo);
  {
    RunConfig unlinked = Config();
    unlinked.link = nullptr;
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
