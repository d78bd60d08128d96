// Exact resume (issue 24): a run stopped after k weight updates and resumed
// from its checkpoint in a fresh IPU system gives bitwise the weights and
// the loss curve of the uninterrupted run: a device loop, 2 replicas,
// float16 weights with float32 masters, GradScaler loss scaling, stochastic
// rounding, dropout, Adam state offloaded and sharded over the replicas,
// gradient accumulation, an Async DataLoader with 2 workers shuffling,
// mid-epoch and at both ends of an epoch. Then the replica-count change
// (4 -> 2, 2 -> 4) by the sample ids each run consumed, and the refusals.
#include "core/checkpoint/training_state.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_test_model.h"
#include "core/hash_mix.h"
#include "core/testing/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::checkpoint {
namespace {

using ::ipuflow::testing::AbsentTestDir;

using ::testing::HasSubstr;

using ::ipuflow::checkpoint::testing::ExpectBitwise;
using ::ipuflow::checkpoint::testing::kBatch;
using ::ipuflow::checkpoint::testing::RunConfig;
using ::ipuflow::checkpoint::testing::TrainingRun;

constexpr int64_t kSamples = 48;  // RunConfig::samples by default.

constexpr int kUpdates = 14;  // 6 per epoch: two epochs and a bit.

TEST(ExactResumeTest, StoppedAfterKUpdatesContinuesBitwise) {
  RunConfig cfg;
  TrainingRun whole(cfg, nullptr);
  ASSERT_TRUE(whole.status().ok()) << whole.status();
  ASSERT_TRUE(whole.Train(kUpdates).ok());
  const auto final_vars = whole.Variables();
  // The run is not trivial: losses change, the replicas' rounding differs.
  ASSERT_EQ(whole.losses.size(), static_cast<size_t>(kUpdates * 2 * 2));
  EXPECT_NE(whole.losses.front(), whole.losses.back());

  // k = 1 (the first update of epoch 0), 3 (mid-epoch), 5 and 6 (the last
  // update of epoch 0 and the end of the epoch), 7 (the first of epoch 1).
  for (int k : {1, 3, 5, 6, 7}) {
    SCOPED_TRACE(absl::StrCat("k = ", k));
    const std::string dir = AbsentTestDir(absl::StrCat("exact_", k));
    std::string path;
    std::vector<float> losses;
    {
      TrainingRun first(cfg, nullptr);
      ASSERT_TRUE(first.status().ok()) << first.status();
      ASSERT_TRUE(first.Train(k).ok());
      auto saved = first.ckpt().Save(dir, k);
      ASSERT_TRUE(saved.ok()) << saved.status();
      path = *saved;
      losses = first.losses;
    }  // The whole first run, its IPU system included, is gone.
    auto c = ReadCheckpointFile(path);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->manifest.steps().weight_updates(), k);
    EXPECT_EQ(c->manifest.loaders(0).epoch(), k / 6);
    EXPECT_EQ(c->manifest.loaders(0).sample(), (k % 6) * 8);
    TrainingRun second(cfg, &*c);
    ASSERT_TRUE(second.status().ok()) << second.status();
    ASSERT_TRUE(second.Train(kUpdates - k).ok());
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    ASSERT_EQ(losses.size(), whole.losses.size());
    EXPECT_EQ(std::memcmp(losses.data(), whole.losses.data(),
                          losses.size() * sizeof(float)),
              0)
        << "loss curves differ";
    ExpectBitwise(second.Variables(), final_vars, "final weights");
  }
}

// Without the random streams restored the resumed run differs: the test
// above would notice a lost random state (dropout, stochastic rounding).
TEST(ExactResumeTest, RandomStreamsAreWhatMakesItExact) {
  RunConfig cfg;
  TrainingRun whole(cfg, nullptr);
  ASSERT_TRUE(whole.Train(4).ok());
  const std::string dir = AbsentTestDir("streams");
  TrainingRun first(cfg, nullptr);
  ASSERT_TRUE(first.Train(2).ok());
  auto saved = first.ckpt().Save(dir, 2);
  ASSERT_TRUE(saved.ok()) << saved.status();
  auto c = ReadCheckpointFile(*saved);
  ASSERT_TRUE(c.ok());
  for (ProgramRuns& p : *c->manifest.mutable_random()->mutable_programs()) {
    p.set_runs(0);  // As if the streams had not been saved.
  }
  TrainingRun second(cfg, &*c);
  ASSERT_TRUE(second.status().ok()) << second.status();
  ASSERT_TRUE(second.Train(2).ok());
  EXPECT_NE(std::memcmp(second.losses.data(), whole.losses.data() + 8,
                        8 * sizeof(float)),
            0);
}

// The ids of the samples a run's devices consumed, as a multiset hash.
uint64_t IdHash(const std::vector<int32_t>& ids) {
  uint64_t h = 0;
  for (int32_t id : ids) h += Mix64(static_cast<uint64_t>(id) + 1);
  return h;
}

// Save at R replicas, resume at R' (4 -> 2, 2 -> 4): the epoch's samples
// are each consumed once (no sample repeated or skipped), and the next epoch
// is the same set as the uninterrupted run's.
TEST(ReplicaChangeTest, InputPositionReSplits) {
  for (auto [from, to] : {std::pair{4, 2}, std::pair{2, 4}}) {
    SCOPED_TRACE(absl::StrCat(from, " -> ", to));
    RunConfig a, b;
    a.replicas = from;
    b.replicas = to;
    a.stochastic_rounding = b.stochastic_rounding = false;
    const int64_t step_a = kBatch * a.accumulation * from;  // Samples/update.
    const int64_t step_b = kBatch * b.accumulation * to;
    const int64_t k = 16 / step_a;  // Save at sample 16 of epoch 0.
    const std::string dir = AbsentTestDir(absl::StrCat("resplit_", from, to));
    std::vector<int32_t> before;
    std::string path;
    {
      TrainingRun first(a, nullptr);
      ASSERT_TRUE(first.status().ok()) << first.status();
      ASSERT_TRUE(first.Train(static_cast<int>(k)).ok());
      path = *first.ckpt().Save(dir, k);
      before = first.ids;
    }
    auto c = ReadCheckpointFile(path);
    ASSERT_TRUE(c.ok());
    TrainingRun second(b, &*c);
    ASSERT_TRUE(second.status().ok()) << second.status();
    const int64_t rest = (kSamples - 16) / step_b;
    ASSERT_TRUE(second.Train(static_cast<int>(rest + kSamples / step_b)).ok());
    std::vector<int32_t> epoch0 = before, epoch1;
    epoch0.insert(epoch0.end(), second.ids.begin(),
                  second.ids.begin() + rest * step_b);
    epoch1.assign(second.ids.begin() + rest * step_b, second.ids.end());
    std::vector<int32_t> all(kSamples);
    for (int i = 0; i < kSamples; ++i) all[i] = i;
    EXPECT_EQ(IdHash(epoch0), IdHash(all));
    std::sort(epoch0.begin(), epoch0.end());
    EXPECT_EQ(epoch0, all);
    // Epoch 1: the uninterrupted run's samples (the order of an epoch does
    // not depend on the replica count when every sample is used).
    TrainingRun whole(a, nullptr);
    ASSERT_TRUE(whole.Train(static_cast<int>(2 * kSamples / step_a)).ok());
    std::vector<int32_t> whole1(whole.ids.begin() + kSamples, whole.ids.end());
    EXPECT_EQ(IdHash(epoch1), IdHash(whole1));
    std::sort(epoch1.begin(), epoch1.end());
    EXPECT_EQ(epoch1, all);
  }
}

TEST(ReplicaChangeTest, PositionThatDoesNotSplitIsRefused) {
  RunConfig a, b;
  a.stochastic_rounding = b.stochastic_rounding = false;
  b.replicas = 4;
  const std::string dir = AbsentTestDir("no_split");
  std::string path;
  {
    TrainingRun first(a, nullptr);
    ASSERT_TRUE(first.Train(1).ok());  // Sample 8; a 4-replica step is 16.
    path = *first.ckpt().Save(dir, 1);
  }
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok());
  TrainingRun second(b, &*c);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              HasSubstr("stands at sample 8 of epoch 0, not a whole number of "
                        "this loader's steps of 16 samples"));
}

TEST(ReplicaChangeTest, VariablesThatDifferPerReplicaAreRefused) {
  // Stochastic rounding of each replica's float16 weights makes them differ.
  RunConfig a, b;
  b.replicas = 4;
  b.stochastic_rounding = true;
  const std::string dir = AbsentTestDir("per_replica");
  std::string path;
  {
    TrainingRun first(a, nullptr);
    ASSERT_TRUE(first.Train(2).ok());
    path = *first.ckpt().Save(dir, 2);
  }
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok());
  bool per_replica = false;
  for (const TensorEntry& e : c->manifest.tensors()) {
    per_replica |= e.replica() >= 0;
  }
  ASSERT_TRUE(per_replica);
  TrainingRun second(b, &*c);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              HasSubstr("differs between the checkpoint's 2 replicas; it "
                        "cannot be restored into 4 replicas"));
}

// ---- Refusals: nothing is loaded in part. ----

class RefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TrainingRun first(RunConfig{}, nullptr);
    ASSERT_TRUE(first.Train(2).ok());
    auto c = first.ckpt().Capture(2);
    ASSERT_TRUE(c.ok()) << c.status();
    saved_ = *std::move(c);
  }
  // A fresh run of `cfg` restoring `c`: its error; its variables untouched.
  absl::Status Restore(const RunConfig& cfg, const CheckpointContents& c) {
    TrainingRun fresh(cfg, nullptr);
    EXPECT_TRUE(fresh.status().ok()) << fresh.status();
    const auto before = fresh.Variables();
    absl::Status s = fresh.ckpt().Restore(c);
    ExpectBitwise(fresh.Variables(), before, "after a refused restore");
    return s;
  }
  CheckpointContents saved_;
};

TEST_F(RefusalTest, AnotherShape) {
  RunConfig cfg;
  cfg.variable_width = 5;
  absl::Status s = Restore(cfg, saved_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[4,3] in the checkpoint and "));
  EXPECT_THAT(s.message(), HasSubstr("[4,5] in this program"));
}

TEST_F(RefusalTest, AnotherDType) {
  CheckpointContents c = saved_;
  for (int i = 0; i < c.manifest.tensors_size(); ++i) {
    if (c.manifest.tensors(i).name() == "w") {
      // Entry and tensor alike: a checkpoint of another model, not an
      // inconsistent one (TensorOfAnotherShapeThanItsEntry).
      c.manifest.mutable_tensors(i)->set_dtype(
          static_cast<int>(DType::kFloat32));
      c.tensors[i] = Tensor(DType::kFloat32, c.tensors[i].shape());
    }
  }
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_THAT(s.message(), HasSubstr("variable 'w' is float32[4,3] in the "
                                     "checkpoint and float16[4,3]"));
}

TEST_F(RefusalTest, MissingAndExtraVariables) {
  RunConfig cfg;
  cfg.extra_variable = true;
  absl::Status s = Restore(cfg, saved_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("another model: it lacks variable(s) 'extra' "
                        "(float32[2]) of this program"));
  CheckpointContents c = saved_;
  c.manifest.mutable_tensors(0)->set_name("renamed");
  s = Restore(RunConfig{}, c);
  EXPECT_THAT(s.message(), HasSubstr("it has variable(s) 'renamed'"));
}

TEST_F(RefusalTest, AnotherTopology) {
  CheckpointContents c = saved_;
  c.manifest.mutable_topology()->set_processes(2);
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("saved by 2 process(es); this run has 1"));
}

TEST_F(RefusalTest, AlteredFingerprint) {
  CheckpointContents c = saved_;
  c.manifest.set_model_fingerprint(c.manifest.model_fingerprint() + 1);
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_THAT(s.message(), HasSubstr("model fingerprint"));
}

TEST_F(RefusalTest, MissingInfeed) {
  CheckpointContents c = saved_;
  c.manifest.mutable_infeeds(0)->set_name("other");
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_THAT(
      s.message(),
      HasSubstr("the checkpoint has no infeed 'train' (it has: other)"));
}

// ---- A manifest is hostile input (issue 30): every count, index and key
// is checked before use; nothing is loaded in part. ----

// A fresh run built from `c`'s input position (its DataLoader resumed), so
// that only what the test altered can refuse the restore.
absl::Status RestoreIntoResumedInput(const CheckpointContents& c) {
  RunConfig cfg;
  cfg.restore = false;
  TrainingRun fresh(cfg, &c);
  EXPECT_TRUE(fresh.status().ok()) << fresh.status();
  const auto before = fresh.Variables();
  absl::Status s = fresh.ckpt().Restore(c);
  if (!s.ok()) ExpectBitwise(fresh.Variables(), before, "refused restore");
  return s;
}

TEST_F(RefusalTest, ManifestListsMoreTensorsThanTheCheckpointHolds) {
  CheckpointContents c = saved_;
  const size_t n = c.tensors.size();
  c.tensors.pop_back();
  c.tensors.shrink_to_fit();
  // At the saved input position: only the missing tensor can refuse it.
  absl::Status s = RestoreIntoResumedInput(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(
                               "the manifest lists ", n,
                               " tensors, the checkpoint holds ", n - 1)));
}

TEST_F(RefusalTest, TensorOfAnotherShapeThanItsEntry) {
  CheckpointContents c = saved_;
  int w = -1;
  for (int i = 0; i < c.manifest.tensors_size() && w < 0; ++i) {
    if (c.manifest.tensors(i).name() == "w") w = i;
  }
  ASSERT_GE(w, 0);
  c.tensors[w] = Tensor(DType::kFloat16, TensorShape({2}));
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("is float16[4,3] in the manifest and "
                                     "float16[2] in the checkpoint's data"));
}

TEST_F(RefusalTest, AVariableListedForEveryReplicaAndForOne) {
  CheckpointContents c = saved_;
  int every = -1;
  for (int i = 0; i < c.manifest.tensors_size() && every < 0; ++i) {
    if (c.manifest.tensors(i).replica() < 0) every = i;
  }
  ASSERT_GE(every, 0);
  TensorEntry extra = c.manifest.tensors(every);
  extra.set_replica(1);
  *c.manifest.add_tensors() = extra;
  c.tensors.push_back(c.tensors[every]);
  absl::Status s = Restore(RunConfig{}, c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("is listed for replicas -1, 1; a variable "
                                     "is listed once for every replica"));
}

TEST_F(RefusalTest, RandomStreamKeysThatNameNoReplica) {
  // Shorter than "replica " with a '|' (an uncaught std::out_of_range before),
  // another prefix, a sign, a replica past the checkpoint's 2.
  for (const char* key : {"r|x", "|", "replica|x", "replicas 0|", "replica +1|",
                          "replica 2|", "replica 99999999999|"}) {
    SCOPED_TRACE(key);
    CheckpointContents c = saved_;
    c.manifest.mutable_random()->mutable_programs(0)->set_key(key);
    absl::Status s = Restore(RunConfig{}, c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("random-stream key '", key,
                                       "' does not name a replica of the "
                                       "checkpoint's 2")));
  }
}

TEST_F(RefusalTest, ConsumedCountsThatOverflowInt64) {
  EXPECT_TRUE(RestoreIntoResumedInput(saved_).ok());
  CheckpointContents c = saved_;
  InfeedPosition* p = c.manifest.mutable_infeeds(0);
  ASSERT_EQ(p->consumed_size(), 2);
  p->set_consumed(0, int64_t{1} << 62);
  p->set_consumed(1, int64_t{1} << 62);
  absl::Status s = RestoreIntoResumedInput(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("restore: infeed 'train': its 2 replicas consumed "
                        "4611686018427387904 elements each, more than int64 "
                        "holds in all"));
  p->set_consumed(0, -4);
  p->set_consumed(1, -4);
  EXPECT_THAT(RestoreIntoResumedInput(c).message(),
              HasSubstr("replica 0 consumed -4 elements, a negative count"));
}

// A Save never removes what it wrote, and never mixes two runs' checkpoints
// in one directory: a new run is refused there, the resumed run continues.
TEST(RunDirectoryTest, AResumedRunSavesIntoItsDirectoryANewRunDoesNot) {
  const std::string dir = AbsentTestDir("run_dir");
  std::string path;
  {
    TrainingRun first(RunConfig{}, nullptr);
    ASSERT_TRUE(first.status().ok()) << first.status();
    ASSERT_TRUE(first.Train(2).ok());
    auto saved = first.ckpt().Save(dir, 2);
    ASSERT_TRUE(saved.ok()) << saved.status();
    path = *saved;
    EXPECT_EQ(first.ckpt().Save(dir, 3, /*keep_last=*/0).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  {
    // Another run, at a higher step: its save would have removed the first
    // run's with keep_last 1.
    TrainingRun other(RunConfig{}, nullptr);
    ASSERT_TRUE(other.status().ok()) << other.status();
    ASSERT_TRUE(other.Train(4).ok());
    auto refused = other.ckpt().Save(dir, 4, /*keep_last=*/1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(refused.status().message(),
                HasSubstr("holds checkpoints of another run"));
    EXPECT_EQ(*LatestCheckpoint(dir), path);
  }
  TrainingRun resumed(RunConfig{}, &*c);
  ASSERT_TRUE(resumed.status().ok()) << resumed.status();
  EXPECT_EQ(resumed.ckpt().run_id(), c->manifest.run_id());
  ASSERT_TRUE(resumed.Train(2).ok());
  auto saved = resumed.ckpt().Save(dir, 4, /*keep_last=*/1);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*LatestCheckpoint(dir), *saved);
  EXPECT_EQ(ListCheckpoints(dir)->size(), 1u);
}

// Writes the seed corpus of //core/checkpoint:checkpoint_restore_fuzzer
// (RefusalTest's checkpoint, as the fuzzer's fixture makes it, and altered
// as the tests above) when CHECKPOINT_RESTORE_FUZZ_SEEDS names a folder:
//   ./bazelw test //core/checkpoint:training_state_test
//     --test_filter='*FuzzSeeds*' --test_env=CHECKPOINT_RESTORE_FUZZ_SEEDS=
//     $PWD/core/checkpoint/testdata/fuzz/checkpoint_restore
TEST_F(RefusalTest, RestoreFuzzSeeds) {
  const char* out = std::getenv("CHECKPOINT_RESTORE_FUZZ_SEEDS");
  if (out == nullptr) GTEST_SKIP() << "CHECKPOINT_RESTORE_FUZZ_SEEDS not set";
  auto write = [&](const std::string& name, const Manifest& m) {
    std::string bytes;
    ASSERT_TRUE(m.SerializeToString(&bytes));
    std::ofstream(std::string(out) + "/" + name, std::ios::binary) << bytes;
  };
  write("valid", saved_.manifest);
  Manifest m = saved_.manifest;
  m.mutable_infeeds(0)->set_consumed(0, int64_t{1} << 62);
  m.mutable_infeeds(0)->set_consumed(1, int64_t{1} << 62);
  write("consumed_overflow", m);
  m = saved_.manifest;
  m.mutable_random()->mutable_programs(0)->set_key("r|x");
  write("short_key", m);
  m = saved_.manifest;
  *m.add_tensors() = m.tensors(0);
  m.mutable_tensors(m.tensors_size() - 1)->set_replica(7);
  write("more_entries", m);
  m = saved_.manifest;
  m.mutable_loaders(0)->set_epoch(int64_t{1} << 62);
  write("loader_epoch_overflow", m);
}

TEST(MidAccumulationTest, IsRefused) {
  // Loops of 3 iterations with an accumulation of 2: after the first run the
  // accumulation is 1 micro-batch in, after the second at a boundary.
  RunConfig cfg;
  cfg.loop_iterations = 3;
  TrainingRun run(cfg, nullptr);
  ASSERT_TRUE(run.status().ok()) << run.status();
  ASSERT_TRUE(run.Train(1).ok());
  absl::StatusOr<CheckpointContents> c = run.ckpt().Capture(1);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(),
              HasSubstr("is 1 micro-batch(es) into an accumulation on "
                        "replica 0; checkpoints are taken at weight-update "
                        "boundaries only"));
  ASSERT_TRUE(run.Train(1).ok());  // 6 micro-batches: at a boundary.
  EXPECT_TRUE(run.ckpt().Capture(2).ok());
}

TEST(MidAccumulationTest, MidDataLoaderStepIsRefused) {
  // One micro-batch per replica per run; the DataLoader's steps hold 2.
  RunConfig cfg;
  cfg.accumulation = 1;
  cfg.loader_accumulation = 2;
  TrainingRun run(cfg, nullptr);
  ASSERT_TRUE(run.status().ok()) << run.status();
  ASSERT_TRUE(run.Train(1).ok());
  absl::StatusOr<CheckpointContents> c = run.ckpt().Capture(1);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(),
              HasSubstr("the devices consumed 2 micro-batches of its "
                        "DataLoader, not a whole number of its steps"));
  ASSERT_TRUE(run.Train(1).ok());
  EXPECT_TRUE(run.ckpt().Capture(2).ok());
}

}  // namespace
}  // namespace ipuflow::checkpoint
