// The README's main example run as a user runs it (the binary, its flags,
// its printed report) on shortened data: one and two replicas learn, two
// replicas end in step, the sharded and offloaded strategies compute the
// same model, float16 learns as float32 in less memory, and bad flags are
// clear errors. No verdict depends on timing.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/half.h"
#include "examples/example_run.h"
#include "gtest/gtest.h"

namespace {

using ::ipuflow::examples::testing::ExampleResult;
using ::ipuflow::examples::testing::ExpectSameResults;
using ::ipuflow::examples::testing::LineFrom;
using ::ipuflow::examples::testing::NumberAfter;

ExampleResult RunExample(const std::string& flags) {
  return ::ipuflow::examples::testing::RunMainExample(flags);
}

// 8000 training images: 2 host calls of 10 weight updates of 400 images;
// 1600 test images.
constexpr char kShort[] = "--train-limit 8000 --test-limit 1600";

TEST(TrainFashionMnistTest, OneReplicaLearns) {
  ExampleResult r = RunExample(kShort);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("micro-batch 40 x gradient accumulation 10 x 1 "
                       "replica(s) = combined batch 400"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Trained 200 micro-batches (20 weight updates)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("200/200"), std::string::npos)  // The monitor saw all.
      << r.err;
  EXPECT_LT(NumberAfter(r.out, "micro-batches: loss "), 1.2) << r.out;
  EXPECT_GT(NumberAfter(r.out, "Test accuracy: "), 60) << r.out;
  EXPECT_NE(r.out.find("of 1600 images"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Replicas in step"), std::string::npos);
}

TEST(TrainFashionMnistTest, TwoReplicasLearnAsOneAndStayInStep) {
  ExampleResult r = RunExample(absl::StrCat(kShort, " --replication-factor 2"));
  ExampleResult one = RunExample(kShort);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  // Gradient accumulation 10 -> 5: the same combined batch, the same
  // number of weight updates.
  EXPECT_NE(r.out.find("x 2 replica(s) on 8 IPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("micro-batch 40 x gradient accumulation 5 x 2 "
                       "replica(s) = combined batch 400"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Trained 200 micro-batches (20 weight updates)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("200/200"), std::string::npos) << r.err;
  // Executable::ReadVariables on both replicas, compared byte by byte.
  EXPECT_NE(r.out.find("bitwise equal on all 2 replicas"), std::string::npos)
      << r.out;
  EXPECT_LT(NumberAfter(r.out, "micro-batches: loss "), 1.2) << r.out;
  EXPECT_GT(NumberAfter(r.out, "Test accuracy: "), 60) << r.out;  // Chance: 10.
  // Each test image once: 1600 images over both replicas.
  EXPECT_NE(r.out.find("of 1600 images"), std::string::npos) << r.out;
  // The same combined batches, averaged in another order: the same model
  // up to rounding.
  EXPECT_NEAR(NumberAfter(r.out, "Test accuracy: "),
              NumberAfter(one.out, "Test accuracy: "), 1.0)
      << r.out << one.out;
}

TEST(TrainFashionMnistTest, ShardedAndOffloadedComputeTheSameModel) {
  const std::string flags =
      "--train-limit 4000 --test-limit 1600 "
      "--device-iterations 2";
  ExampleResult a = RunExample(flags);
  ExampleResult b =
      RunExample(flags + " --strategy sharded --offload-optimiser");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("sharded"), std::string::npos);
  // Same micro-batches, same accumulation order: the same weights, so the
  // same losses and the same correctly classified test images.
  ASSERT_NO_FATAL_FAILURE(ExpectSameResults(a, b));
}

// IPU k's total in the --debug memory report, in KiB (NaN if absent).
double IpuMemoryKiB(const std::string& out, int ipu) {
  const size_t report = out.find("Memory per IPU");
  if (report == std::string::npos) return std::nan("");
  const std::string line =
      LineFrom(out.substr(report), absl::StrCat("  IPU ", ipu, " (shard "));
  const double value = NumberAfter(line, ": ");
  return line.find("MiB of") < line.find("KiB of") ? value * 1024 : value;
}

// Issue 11's mixed precision: float16 weights and activations with float32
// master weights, stochastic rounding and automatic loss scaling learn as
// float32 does, in about half the memory.
TEST(TrainFashionMnistTest, HalfPrecisionLearnsAsFloat32InLessMemory) {
  ExampleResult half =
      RunExample(absl::StrCat(kShort, " --precision fp16 --debug"));
  ExampleResult full = RunExample(absl::StrCat(kShort, " --debug"));
  ASSERT_EQ(half.exit_code, 0) << half.out << half.err;
  ASSERT_EQ(full.exit_code, 0) << full.out << full.err;
  EXPECT_NE(half.err.find("200/200"), std::string::npos) << half.err;
  EXPECT_GT(NumberAfter(half.out, "Test accuracy: "), 60) << half.out;
  EXPECT_NEAR(NumberAfter(half.out, "Test accuracy: "),
              NumberAfter(full.out, "Test accuracy: "), 3.0)
      << half.out << full.out;
  // The scale moved from its initial 128 (doubled or halved each update).
  const double scale = NumberAfter(half.out, "Loss scale after training: ");
  EXPECT_GT(scale, 0) << half.out;
  EXPECT_NE(scale, 128) << half.out;
  EXPECT_EQ(full.out.find("Loss scale"), std::string::npos);
  // Activations, stash and weights in 2 bytes: IPU 0 (the first conv
  // block, mostly stash) needs well under two thirds of float32's memory.
  const double half_kib = IpuMemoryKiB(half.out, 0);
  const double full_kib = IpuMemoryKiB(full.out, 0);
  EXPECT_GT(half_kib, 0) << half.out;
  EXPECT_LT(half_kib, 0.65 * full_kib) << half.out << full.out;
}

TEST(TrainFashionMnistTest, BadPrecisionFlagsAreErrors) {
  ExampleResult r = RunExample("--precision bf16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--precision is 'bf16'; it must be fp32 or fp16"),
            std::string::npos)
      << r.err;
  r = RunExample("--precision fp16 --stochastic-rounding sometimes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--stochastic-rounding is 'sometimes'; it must be "
                       "replica_identical_only, on or off"),
            std::string::npos)
      << r.err;
  r = RunExample("--precision fp16 --loss-scaling -2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--loss-scaling is -2; it must be a finite number "
                       "between 0 and 16777216"),
            std::string::npos)
      << r.err;
}

// Issue 22: the example says so and exits 1 when it cannot write what it
// was asked to; it finds out before training.
TEST(TrainFashionMnistTest, AnUnwritableProfileDirectoryExitsNonZero) {
  ExampleResult r = RunExample(
      absl::StrCat(kShort, " --profile --profile-dir /proc/ipuflow/profile"));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("--profile: could not create '/proc/ipuflow/profile'"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("Trained"), std::string::npos) << r.out;
}

TEST(TrainFashionMnistTest, BadReplicationFactorsNameReplicasStagesAndIpus) {
  for (const char* bad : {"0", "3", "5", "17"}) {
    ExampleResult r = RunExample(absl::StrCat("--replication-factor ", bad));
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
    for (const char* word :
         {"--replication-factor", "replicas", "stages", "IPUs"}) {
      EXPECT_NE(r.err.find(word), std::string::npos)
          << bad << ": " << word << " missing from " << r.err;
    }
    EXPECT_EQ(r.out.find("Trained"), std::string::npos) << bad;
  }
  // 3 replicas cannot share the default accumulation 10; 5 would leave 2
  // micro-batches for 4 stages.
  EXPECT_NE(RunExample("--replication-factor 3")
                .err.find("3 replicas x 4 stages = 12 IPUs"),
            std::string::npos);
  EXPECT_NE(RunExample("--replication-factor 5")
                .err.find("5 replicas x 4 stages = 20 IPUs"),
            std::string::npos);
}

TEST(TrainFashionMnistTest, BadStrategyIsAnError) {
  ExampleResult r = RunExample("--strategy phased");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find("--strategy is 'phased'; it must be pipelined or sharded"),
      std::string::npos)
      << r.err;
}

// Kernels split their work over the IPU's worker threads, never their
// results: none, one and three workers per IPU train to the same loss,
// accuracy and test accuracy, bit for bit (the default is no worker on a
// 2-core machine, cores / IPUs - 1 on a larger one).
TEST(TrainFashionMnistTest, ResultsDoNotDependOnTheThreadCount) {
  ExampleResult none = RunExample(kShort);
  ASSERT_EQ(none.exit_code, 0) << none.out << none.err;
  for (const char* threads : {"1", "3"}) {
    SCOPED_TRACE(threads);
    ExampleResult r =
        RunExample(absl::StrCat(kShort, " --intra-op-threads ", threads));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ExpectSameResults(none, r);
  }
}

// Issue 24: a run stopped after 4 of its 10 weight updates (--stop-after)
// and resumed from its checkpoint (--resume, a new process) ends with
// bitwise the weights and optimizer state of the uninterrupted run (their
// last checkpoints compared tensor by tensor), the same loss and test
// accuracy; its progress bar continues where the first part stopped. In
// float16 with stochastic rounding on every result, so the stage programs'
// random streams must be restored too.
TEST(TrainFashionMnistTest, StoppedAndResumedRunEndsBitwiseAsOneRun) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = absl::StrCat(tmp ? tmp : "/tmp", "/resume");
  const std::string whole_dir = root + "/whole", parts_dir = root + "/parts";
  const std::string flags =
      "--train-limit 4000 --test-limit 800 --device-iterations 2 "
      "--checkpoint-every 2 --keep-checkpoints 2 --precision fp16 "
      "--stochastic-rounding on --checkpoint-dir ";
  ExampleResult whole = RunExample(flags + whole_dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("Checkpoints: 5 saved in " + whole_dir +
                           " (the newest 2 kept)"),
            std::string::npos)
      << whole.out;
  ExampleResult first = RunExample(flags + parts_dir + " --stop-after 4");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("Stopped after 4 weight updates (--stop-after)"),
            std::string::npos)
      << first.out;
  EXPECT_EQ(first.out.find("Test accuracy"), std::string::npos) << first.out;
  ExampleResult rest = RunExample(flags + parts_dir + " --resume");
  ASSERT_EQ(rest.exit_code, 0) << rest.out << rest.err;
  EXPECT_NE(rest.out.find("Resuming from " + parts_dir +
                          "/ckpt-000000000004.ipuckpt (weight update 4)"),
            std::string::npos)
      << rest.out;
  EXPECT_NE(rest.out.find("Trained 60 micro-batches (6 weight updates)"),
            std::string::npos)
      << rest.out;
  // The bar goes on from 40 of 100 micro-batches to the end.
  EXPECT_NE(rest.err.find("100/100"), std::string::npos) << rest.err;
  EXPECT_EQ(rest.err.find(" 10/100"), std::string::npos) << rest.err;
  // The last 50 micro-batches are all the resumed run's: the same losses.
  ASSERT_NO_FATAL_FAILURE(ExpectSameResults(whole, rest));
  // Every tensor of the final checkpoints, bitwise.
  auto a = ipuflow::checkpoint::ReadCheckpointFile(
      ipuflow::checkpoint::NumberedCheckpointPath(whole_dir, 10));
  auto b = ipuflow::checkpoint::ReadCheckpointFile(
      ipuflow::checkpoint::NumberedCheckpointPath(parts_dir, 10));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  ASSERT_GT(a->tensors.size(), 8u);  // Weights, masters, AdamW, loss scale.
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    const auto& ea = a->manifest.tensors(i);
    const auto& eb = b->manifest.tensors(i);
    EXPECT_EQ(ea.name(), eb.name());
    ASSERT_EQ(a->tensors[i].TotalBytes(), b->tensors[i].TotalBytes());
    EXPECT_EQ(std::memcmp(a->tensors[i].raw_data(), b->tensors[i].raw_data(),
                          a->tensors[i].TotalBytes()),
              0)
        << ea.name();
  }
  // Two kept of each run.
  EXPECT_EQ(ipuflow::checkpoint::ListCheckpoints(whole_dir)->size(), 2u);
}

TEST(TrainFashionMnistTest, ResumeRefusals) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/refusals");
  ExampleResult r = RunExample(
      absl::StrCat("--train-limit 4000 --test-limit 800 --device-iterations 2 "
                   "--stop-after 2 --checkpoint-dir ",
                   dir));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A new run in the first one's directory (issue 30): refused before it
  // trains, instead of mixing two runs' checkpoints there.
  r = RunExample(
      absl::StrCat("--train-limit 4000 --test-limit 800 --device-iterations 2 "
                   "--stop-after 4 --checkpoint-dir ",
                   dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find("--checkpoint-dir " + dir +
                 " holds checkpoints of an earlier run (the newest: " + dir +
                 "/ckpt-000000000002.ipuckpt); continue it with "
                 "--resume"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("Trained"), std::string::npos);
  // Another --device-iterations: the checkpoint is not a whole call.
  r = RunExample(absl::StrCat(
      "--train-limit 4000 --test-limit 800 --device-iterations 5 --resume "
      "--checkpoint-dir ",
      dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("stands at weight update 2, not a whole number of "
                       "training calls of 5 weight updates"),
            std::string::npos)
      << r.err;
  // Another model: the checkpoint's variables are float32.
  r = RunExample(absl::StrCat(
      "--train-limit 4000 --test-limit 800 --device-iterations 2 --resume "
      "--precision fp16 --checkpoint-dir ",
      dir));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--resume from " + dir), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the checkpoint is of another model"), std::string::npos)
      << r.err;
  // Bad flags never start.
  r = RunExample("--checkpoint-every 15 --checkpoint-dir /tmp/x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--checkpoint-every is 15 weight updates, not a "
                       "multiple of --device-iterations (10)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("Trained"), std::string::npos);
}

}  // namespace
