#include "core/checkpoint/checkpoint_file.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/crc32c.h"
#include "core/half.h"
#include "core/testing/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::checkpoint {
namespace {

using ::ipuflow::testing::EmptyTestDir;

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// Tensors of every stored dtype, a scalar, an empty one, per replica.
CheckpointContents Sample(float scale = 1) {
  CheckpointContents c;
  auto add = [&](const std::string& name, int replica, Tensor t) {
    TensorEntry* e = c.manifest.add_tensors();
    e->set_name(name);
    e->set_replica(replica);
    c.tensors.push_back(std::move(t));
  };
  add("w", -1, Tensor::FromVector<float>({1.5f * scale, -2, 3e-8f, 4}, {2, 2}));
  add("h", 0, Tensor::FromVector<half>({half(1.0f), half(-0.5f)}, {2}));
  add("h", 1, Tensor::FromVector<half>({half(2.0f), half(65504.0f)}, {2}));
  add("step", -1, Tensor::Scalar<int64_t>(123456789012345));
  add("count", -1, Tensor::FromVector<int32_t>({7, -7, 0}, {3}));
  add("flag", -1, Tensor::FromVector<bool>({true, false}, {2}));
  add("empty", -1, Tensor(DType::kFloat32, TensorShape({0, 3})));
  c.manifest.set_model_fingerprint(0xABCDEF);
  c.manifest.mutable_topology()->set_replicas(2);
  c.manifest.mutable_steps()->set_weight_updates(5);
  return c;
}

void ExpectSameTensors(const CheckpointContents& a,
                       const CheckpointContents& b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i], &y = b.tensors[i];
    EXPECT_EQ(x.dtype(), y.dtype()) << i;
    EXPECT_EQ(x.shape(), y.shape()) << i;
    ASSERT_EQ(x.TotalBytes(), y.TotalBytes()) << i;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.TotalBytes()), 0) << i;
    EXPECT_EQ(a.manifest.tensors(i).name(), b.manifest.tensors(i).name());
    EXPECT_EQ(a.manifest.tensors(i).replica(), b.manifest.tensors(i).replica());
  }
}

TEST(CheckpointFileTest, RoundTripIsBitwise) {
  const std::string path = EmptyTestDir("roundtrip") + "/a.ipuckpt";
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(path, &c).ok());
  absl::StatusOr<CheckpointContents> back = ReadCheckpointFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameTensors(c, *back);
  EXPECT_EQ(back->manifest.model_fingerprint(), 0xABCDEFu);
  EXPECT_EQ(back->manifest.steps().weight_updates(), 5);
  EXPECT_EQ(back->manifest.topology().replicas(), 2);
  // No temporary file is left.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           std::filesystem::path(path).parent_path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  // Tensors are 64-byte aligned views.
  for (const Tensor& t : back->tensors) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
  }
}

TEST(CheckpointFileTest, EverySingleByteChangeIsRefused) {
  const std::string path = EmptyTestDir("flips") + "/a.ipuckpt";
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(path, &c).ok());
  const std::string good = ReadAll(path);
  ASSERT_TRUE(ParseCheckpoint(good, "good").ok());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    absl::StatusOr<CheckpointContents> r = ParseCheckpoint(bad, "bad");
    EXPECT_FALSE(r.ok()) << "byte " << i << " of " << good.size();
  }
}

TEST(CheckpointFileTest, CorruptTensorNamesItAndBothChecksums) {
  const std::string path = EmptyTestDir("corrupt") + "/a.ipuckpt";
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(path, &c).ok());
  std::string bytes = ReadAll(path);
  const uint64_t payload = bytes.size() - c.manifest.payload_size();
  const TensorEntry& h1 = c.manifest.tensors(2);  // "h", replica 1
  bytes[payload + h1.offset() + 1] ^= 1;
  WriteAll(path, bytes);
  absl::StatusOr<CheckpointContents> r = ReadCheckpointFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("tensor 'h' (replica 1)"));
  EXPECT_THAT(r.status().message(), HasSubstr("CRC32C 0x"));
  EXPECT_THAT(r.status().message(), HasSubstr(" stored, 0x"));
  EXPECT_THAT(r.status().message(), HasSubstr(path));
}

TEST(CheckpointFileTest, EveryTruncationIsRefused) {
  const std::string path = EmptyTestDir("truncated") + "/a.ipuckpt";
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(path, &c).ok());
  const std::string good = ReadAll(path);
  for (size_t n = 0; n < good.size(); ++n) {
    absl::StatusOr<CheckpointContents> r =
        ParseCheckpoint(absl::string_view(good).substr(0, n), "cut");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << n;
  }
  absl::StatusOr<CheckpointContents> r =
      ParseCheckpoint(good.substr(0, good.size() - 3), "cut");
  EXPECT_THAT(r.status().message(), HasSubstr("truncated"));
  EXPECT_FALSE(ParseCheckpoint(good + "x", "long").ok());
}

TEST(CheckpointFileTest, InconsistentManifestsAreRefused) {
  const std::string dir = EmptyTestDir("manifest");
  // A tensor whose bytes do not match its dtype and shape, written by hand:
  // a writer bug the reader still catches.
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(dir + "/a.ipuckpt", &c).ok());
  auto rewrite = [&](const std::function<void(Manifest*)>& edit) {
    // Rebuilds the file around an edited manifest (the header's CRC fixed
    // up), keeping the payload.
    std::string bytes = ReadAll(dir + "/a.ipuckpt");
    uint64_t len;
    std::memcpy(&len, bytes.data() + 16, 8);
    Manifest m;
    EXPECT_TRUE(m.ParseFromArray(bytes.data() + 24, static_cast<int>(len)));
    edit(&m);
    const std::string payload =
        bytes.substr(bytes.size() - c.manifest.payload_size());
    std::string out = bytes.substr(0, 24);
    std::string ms;
    m.SerializeToString(&ms);
    const uint64_t n = ms.size();
    std::memcpy(out.data() + 16, &n, 8);
    out += ms;
    out.append((64 - out.size() % 64) % 64, '\0');
    out += payload;
    const uint32_t crc = Crc32c(ms.data(), ms.size());
    std::memcpy(out.data() + 12, &crc, 4);
    return ParseCheckpoint(out, "edited");
  };
  EXPECT_TRUE(rewrite([](Manifest*) {}).ok());
  auto expect = [&](const std::function<void(Manifest*)>& edit,
                    const std::string& text) {
    absl::StatusOr<CheckpointContents> r = rewrite(edit);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(text));
  };
  expect([](Manifest* m) { m->mutable_tensors(0)->set_dtype(6); },
         "tensor 'w' (every replica): dtype 6 is not a stored dtype");
  expect([](Manifest* m) { m->mutable_tensors(0)->set_shape(0, 3); },
         "size 16 bytes, its dtype and shape make 24");
  expect([](Manifest* m) { m->mutable_tensors(0)->set_shape(0, -1); },
         "dimension -1 is negative");
  expect([](Manifest* m) { m->mutable_tensors(2)->set_replica(0); },
         "tensor 'h' (replica 0): listed twice");
  expect([](Manifest* m) { m->mutable_tensors(1)->set_replica(-1); },
         "listed both for every replica and for one replica");
  expect([](Manifest* m) { m->mutable_tensors(1)->set_offset(0); },
         "at payload offset 0, expected 64");
  expect([](Manifest* m) { m->set_format_version(2); },
         "manifest format version 2");
  expect([](Manifest* m) { m->mutable_tensors()->RemoveLast(); },
         "the tensors fill");
}

TEST(CheckpointFileTest, NumberedKeepsTheLastK) {
  const std::string dir = EmptyTestDir("numbered") + "/run";
  for (int step = 1; step <= 5; ++step) {
    CheckpointContents c = Sample(static_cast<float>(step));
    absl::StatusOr<std::string> path =
        WriteNumberedCheckpoint(dir, step, &c, 3);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, NumberedCheckpointPath(dir, step));
  }
  absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> all =
      ListCheckpoints(dir);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].first, 3);
  EXPECT_EQ((*all)[2].first, 5);
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok());
  absl::StatusOr<CheckpointContents> back = ReadCheckpointFile(*latest);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tensors[0].data<float>()[0], 7.5f);
  EXPECT_EQ(LatestCheckpoint(EmptyTestDir("none")).status().code(),
            absl::StatusCode::kNotFound);
  CheckpointContents c = Sample();
  EXPECT_FALSE(WriteNumberedCheckpoint(dir, 6, &c, 0).ok());
}

// ---- One run per directory (issue 30): a save never removes what it wrote.

// Sample contents of run `run_id`.
CheckpointContents OfRun(uint64_t run_id, float scale = 1) {
  CheckpointContents c = Sample(scale);
  c.manifest.set_run_id(run_id);
  return c;
}

std::vector<int64_t> Steps(const std::string& dir) {
  std::vector<int64_t> steps;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    steps.push_back(std::stoll(name.substr(5, 12)));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

TEST(CheckpointDirectoryTest, AnotherRunsDirectoryIsRefusedAndLeftAlone) {
  const std::string dir = EmptyTestDir("other_run");
  for (int step = 5; step <= 7; ++step) {
    CheckpointContents a = OfRun(0xA, static_cast<float>(step));
    ASSERT_TRUE(WriteNumberedCheckpoint(dir, step, &a, 3).ok());
  }
  // A new run at a lower step (it would have been removed at once) and at
  // a higher one (it would have removed the other run's).
  for (int step : {1, 9}) {
    CheckpointContents b = OfRun(0xB);
    absl::StatusOr<std::string> saved =
        WriteNumberedCheckpoint(dir, step, &b, 1);
    EXPECT_EQ(saved.status().code(), absl::StatusCode::kFailedPrecondition)
        << step;
    EXPECT_THAT(saved.status().message(),
                HasSubstr("holds checkpoints of another run (run "
                          "000000000000000a; its newest, '" +
                          NumberedCheckpointPath(dir, 7) +
                          "', at weight update 7); this is run "
                          "000000000000000b: save into a fresh directory, or "
                          "continue that run by resuming"));
    EXPECT_EQ(Steps(dir), (std::vector<int64_t>{5, 6, 7})) << step;
  }
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, NumberedCheckpointPath(dir, 7));
  // The same run continues.
  CheckpointContents a = OfRun(0xA, 8);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 8, &a, 1).ok());
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{8}));
}

TEST(CheckpointDirectoryTest, AFileNamedLikeACheckpointIsNotTakenForOne) {
  const std::string dir = EmptyTestDir("junk");
  CheckpointContents a = OfRun(0xA);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 1, &a, 1).ok());
  const std::string junk = NumberedCheckpointPath(dir, 99);
  WriteAll(junk, "not a checkpoint");
  // keep 1 would have kept the junk alone.
  CheckpointContents next = OfRun(0xA, 2);
  absl::StatusOr<std::string> saved = WriteNumberedCheckpoint(dir, 2, &next, 1);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(saved.status().message(),
              HasSubstr("'" + junk +
                        "' is named as a checkpoint but is not one this build "
                        "reads (checkpoint '" +
                        junk + "': truncated"));
  EXPECT_THAT(saved.status().message(), HasSubstr("remove that file"));
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{1, 99}));
  EXPECT_EQ(LatestCheckpoint(dir).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RemoveOldCheckpoints(dir, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{1, 99}));
  // A real checkpoint renamed: its manifest's step is not its name's.
  std::filesystem::rename(NumberedCheckpointPath(dir, 1), junk);
  EXPECT_THAT(LatestCheckpoint(dir).status().message(),
              HasSubstr("holds weight update 1, not its name's 99"));
}

TEST(CheckpointDirectoryTest, ASaveBehindTheRunsNewestIsRefused) {
  const std::string dir = EmptyTestDir("lower_step");
  CheckpointContents a = OfRun(0xA, 5);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 5, &a, 1).ok());
  CheckpointContents older = OfRun(0xA, 3);
  absl::StatusOr<std::string> saved =
      WriteNumberedCheckpoint(dir, 3, &older, 1);
  EXPECT_EQ(saved.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(saved.status().message(),
              HasSubstr("of this run at weight update 5, after 3: a save never "
                        "goes behind the newest checkpoint of its directory"));
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{5}));
  // The same step again replaces it: still the newest.
  CheckpointContents again = OfRun(0xA, 6);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 5, &again, 1).ok());
  absl::StatusOr<CheckpointContents> back =
      ReadCheckpointFile(*LatestCheckpoint(dir));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors[0].data<float>()[0], 9.0f);
}

TEST(CheckpointDirectoryTest, KeepBelowOneIsRefused) {
  const std::string dir = EmptyTestDir("keep0");
  CheckpointContents a = OfRun(0xA);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 1, &a, 1).ok());
  for (int keep : {0, -5}) {
    absl::Status s = RemoveOldCheckpoints(dir, keep);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << keep;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("keep_last ", keep, "; at least 1")));
    CheckpointContents b = OfRun(0xA, 2);
    EXPECT_EQ(WriteNumberedCheckpoint(dir, 2, &b, keep).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Steps(dir), (std::vector<int64_t>{1}));
}

TEST(CheckpointDirectoryTest, TwoRunsInOneDirectoryHaveNoNewest) {
  // As an older build could leave it: written file by file.
  const std::string dir = EmptyTestDir("two_runs");
  CheckpointContents a = OfRun(0xA), b = OfRun(0xB);
  a.manifest.mutable_steps()->set_weight_updates(4);
  b.manifest.mutable_steps()->set_weight_updates(99);
  ASSERT_TRUE(WriteCheckpointFile(NumberedCheckpointPath(dir, 4), &a).ok());
  ASSERT_TRUE(WriteCheckpointFile(NumberedCheckpointPath(dir, 99), &b).ok());
  absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
  EXPECT_EQ(latest.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(latest.status().message(),
              HasSubstr("holds checkpoints of two runs: run 000000000000000a"));
  EXPECT_THAT(latest.status().message(), HasSubstr("run 000000000000000b"));
}

TEST(CheckpointFileTest, ReadCheckpointManifestReadsTheManifestOnly) {
  const std::string dir = EmptyTestDir("manifest_only");
  CheckpointContents c = OfRun(0xC);
  const std::string path = dir + "/c.ipuckpt";
  ASSERT_TRUE(WriteCheckpointFile(path, &c).ok());
  absl::StatusOr<Manifest> m = ReadCheckpointManifest(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->run_id(), 0xCu);
  EXPECT_EQ(m->tensors_size(), c.manifest.tensors_size());
  // A damaged payload is not its business; a damaged manifest is.
  std::string bytes = ReadAll(path);
  bytes.back() ^= 1;
  WriteAll(path, bytes);
  EXPECT_TRUE(ReadCheckpointManifest(path).ok());
  bytes[30] ^= 1;
  WriteAll(path, bytes);
  EXPECT_EQ(ReadCheckpointManifest(path).status().code(),
            absl::StatusCode::kDataLoss);
  for (size_t n : {size_t{0}, size_t{10}, size_t{24}, size_t{40}}) {
    WriteAll(path, bytes.substr(0, n));
    EXPECT_EQ(ReadCheckpointManifest(path).status().code(),
              absl::StatusCode::kDataLoss)
        << n;
  }
}

// A writer killed by SIGKILL at any byte offset of its write (a hook in the
// write loop raises it: deterministic, no timing) leaves the previous
// checkpoint the latest and loadable; the next writer removes the
// temporary file.
TEST(CheckpointFileTest, KilledWriterLeavesThePreviousCheckpoint) {
  const std::string dir = EmptyTestDir("killed");
  CheckpointContents first = Sample(1);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 1, &first, 3).ok());
  const int64_t size =
      static_cast<int64_t>(ReadAll(NumberedCheckpointPath(dir, 1)).size());
  for (int64_t kill_at : {int64_t{1}, int64_t{24}, size / 2, size - 1, size}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      CheckpointContents second = Sample(2);
      WriteOptions o;
      o.after_write = [kill_at](int64_t written) {
        if (written >= kill_at) raise(SIGKILL);
      };
      (void)WriteNumberedCheckpoint(dir, 2, &second, 3, o);
      _exit(0);  // Not reached: the hook kills the writer first.
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "kill at " << kill_at;
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
    absl::StatusOr<std::string> latest = LatestCheckpoint(dir);
    ASSERT_TRUE(latest.ok());
    EXPECT_EQ(*latest, NumberedCheckpointPath(dir, 1)) << kill_at;
    absl::StatusOr<CheckpointContents> back = ReadCheckpointFile(*latest);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSameTensors(first, *back);
  }
  // The killed writers' temporary files are gone after the next write.
  CheckpointContents third = Sample(3);
  ASSERT_TRUE(WriteNumberedCheckpoint(dir, 3, &third, 3).ok());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos);
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST(CheckpointFileTest, MissingFileIsNotFound) {
  absl::StatusOr<CheckpointContents> r =
      ReadCheckpointFile(EmptyTestDir("missing") + "/nope.ipuckpt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("nope.ipuckpt"));
}

// Writes the fuzzer's seed corpus when CHECKPOINT_FUZZ_SEEDS names a folder
// (./bazelw test //core/checkpoint:checkpoint_file_test
//  --test_env=CHECKPOINT_FUZZ_SEEDS=$PWD/core/checkpoint/testdata/fuzz/checkpoint).
TEST(CheckpointFileTest, FuzzSeeds) {
  const char* out = std::getenv("CHECKPOINT_FUZZ_SEEDS");
  if (out == nullptr) GTEST_SKIP() << "CHECKPOINT_FUZZ_SEEDS not set";
  CheckpointContents c = Sample();
  ASSERT_TRUE(WriteCheckpointFile(std::string(out) + "/sample", &c).ok());
  CheckpointContents one;
  one.manifest.add_tensors()->set_name("x");
  one.tensors.push_back(Tensor::Scalar<float>(1));
  ASSERT_TRUE(WriteCheckpointFile(std::string(out) + "/scalar", &one).ok());
  CheckpointContents none;
  ASSERT_TRUE(WriteCheckpointFile(std::string(out) + "/empty", &none).ok());
}

}  // namespace

}  // namespace ipuflow::checkpoint
