// The main example's flags (issue 22, items 4 and 5): every flag walked
// through 0, -1, its largest value, one past it and INT_MAX, the products
// of flags over their limits, the special values of the learning rate and
// the loss scale, values Abseil cannot parse; every error names the flag,
// the value and the limit. Through ParseTutorialFlagArgs, the parser
// train_fashion_mnist uses, without starting the example.
#include "examples/tutorial_flags.h"

#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::examples {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

absl::StatusOr<TutorialFlags> Parse(std::vector<std::string> args) {
  return ParseTutorialFlagArgs(args);
}

std::string Error(std::vector<std::string> args) {
  absl::StatusOr<TutorialFlags> f = Parse(args);
  if (f.ok()) return "OK";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument)
      << f.status();
  return std::string(f.status().message());
}

TEST(TutorialFlagsTest, DefaultsAreTheTutorials) {
  absl::StatusOr<TutorialFlags> f = Parse({});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->batch_size, 40);
  EXPECT_EQ(f->gradient_accumulation, 10);
  EXPECT_EQ(f->replicas, 1);
  EXPECT_EQ(f->device_iterations, 10);
  EXPECT_FLOAT_EQ(f->learning_rate, 0.001f);
  EXPECT_TRUE(f->pipelined());
  // Two replicas share the default accumulation: 10 / 2.
  f = Parse({"--replication-factor=2"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->gradient_accumulation, 5);
  // Flags given to one call do not leak into the next.
  ASSERT_TRUE(Parse({"--batch-size", "7"}).ok());
  EXPECT_EQ(Parse({})->batch_size, 40);
}

// Each integer flag through 0, -1, its largest value (accepted), one past
// it and INT_MAX (refused, naming flag, value and limit).
TEST(TutorialFlagsTest, EveryIntegerFlagIsCheckedForItsWholeRange) {
  struct Case {
    const char* flag;
    int64_t largest;
    std::vector<std::string> with;  // What the largest value needs.
  };
  const std::vector<Case> cases = {
      {"--batch-size", 1 << 16, {}},
      {"--device-iterations", 1 << 20, {}},
      {"--test-batch-size", 1 << 16, {}},
      {"--test-device-iterations", 1 << 20, {}},
      {"--epochs", 1 << 16, {}},
      {"--gradient-accumulation", 1 << 16, {}},
      {"--replication-factor", 16, {"--gradient-accumulation=4"}},
      {"--loader-workers", 64, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag);
    const std::string range =
        absl::StrCat("; it must be between 1 and ", c.largest);
    for (int64_t bad :
         {int64_t{0}, int64_t{-1}, c.largest + 1, int64_t{INT_MAX}}) {
      EXPECT_THAT(Error({absl::StrCat(c.flag, "=", bad)}),
                  HasSubstr(absl::StrCat(c.flag, " is ", bad, range)));
    }
    std::vector<std::string> args = c.with;
    args.push_back(absl::StrCat(c.flag, "=", c.largest));
    EXPECT_EQ(Error(args), "OK");
    args.back() = absl::StrCat(c.flag, "=1");
    if (std::string(c.flag) != "--gradient-accumulation" &&
        std::string(c.flag) != "--replication-factor") {
      EXPECT_EQ(Error(args), "OK");
    }
  }
  // A pipeline of 4 stages needs 4 micro-batches per update.
  EXPECT_THAT(Error({"--gradient-accumulation=3"}),
              HasSubstr("needs at least 4 micro-batches per weight update"));
  EXPECT_EQ(Error({"--gradient-accumulation=1", "--strategy=sharded"}), "OK");
  // The sentinels of the 64-bit flags: -1 is every image, 0 and -2 are
  // refused; the largest value is accepted.
  for (const char* flag : {"--train-limit", "--test-limit"}) {
    EXPECT_EQ(Error({absl::StrCat(flag, "=-1")}), "OK");
    EXPECT_EQ(Error({absl::StrCat(flag, "=", INT64_MAX)}), "OK");
    for (int bad : {0, -2}) {
      EXPECT_THAT(Error({absl::StrCat(flag, "=", bad)}),
                  HasSubstr(absl::StrCat(flag, " is ", bad,
                                         "; it must be -1 (every image) or "
                                         "between 1 and ",
                                         INT64_MAX)));
    }
  }
  EXPECT_EQ(Error({absl::StrCat("--seed=", INT64_MAX)}), "OK");
  EXPECT_THAT(Error({"--seed=-1"}),
              HasSubstr(absl::StrCat("--seed is -1; it must be between 0 and ",
                                     INT64_MAX)));
}

// Issue 22: --gradient-accumulation -7 meant the default; now any value
// given is checked (unset is the default).
TEST(TutorialFlagsTest, NoNegativeGradientAccumulationMeansTheDefault) {
  for (const char* bad : {"-7", "-1", "0"}) {
    EXPECT_THAT(Error({"--gradient-accumulation", bad}),
                HasSubstr(absl::StrCat("--gradient-accumulation is ", bad,
                                       "; it must be between 1 and 65536")));
  }
  EXPECT_EQ(Parse({"--gradient-accumulation=16"})->gradient_accumulation, 16);
}

TEST(TutorialFlagsTest, ProductsOfFlagsAreCheckedInInt64) {
  // 65536 x 65536 x 16 = 2^36 images per weight update (int would wrap).
  EXPECT_THAT(
      Error({"--batch-size=65536", "--gradient-accumulation=65536",
             "--replication-factor=16"}),
      HasSubstr("--batch-size x --gradient-accumulation x "
                "--replication-factor = 65536 x 65536 x 16 = 68719476736; "
                "the limit is 16777216 images per weight update"));
  EXPECT_THAT(Error({"--batch-size=65536", "--gradient-accumulation=256",
                     "--device-iterations=1048576"}),
              HasSubstr("the combined batch x --device-iterations = 16777216 "
                        "x 1048576 = 17592186044416; the limit is 1073741824 "
                        "images per training call"));
  EXPECT_THAT(
      Error({"--test-batch-size=65536", "--test-device-iterations=1048576"}),
      HasSubstr("--test-batch-size x --test-device-iterations x "
                "--replication-factor = 65536 x 1048576 x 1"));
}

TEST(TutorialFlagsTest, LearningRateMustBeFiniteAndNotNegative) {
  for (const char* bad : {"nan", "inf", "-inf", "-1", "1e300", "1001"}) {
    EXPECT_THAT(Error({"--learning-rate", bad}),
                AllOf(HasSubstr("--learning-rate is "),
                      HasSubstr("it must be a finite number between 0 and "
                                "1000")))
        << bad;
  }
  EXPECT_EQ(Error({"--learning-rate=0"}), "OK");
  EXPECT_EQ(Error({"--learning-rate=1000"}), "OK");
  EXPECT_FLOAT_EQ(Parse({"--learning-rate=0.01"})->learning_rate, 0.01f);
}

TEST(TutorialFlagsTest, LossScalingIsAutomaticOrAFiniteScale) {
  EXPECT_EQ(Parse({"--loss-scaling=1024"})->loss_scaling.loss_scaling, 1024.f);
  EXPECT_EQ(Parse({"--loss-scaling=16777216"})->loss_scaling.loss_scaling,
            16777216.f);
  for (const char* bad : {"0", "-2", "nan", "inf", "16777217", "1e39"}) {
    EXPECT_THAT(Error({"--loss-scaling", bad}),
                AllOf(HasSubstr("--loss-scaling is "), HasSubstr("16777216")))
        << bad;
  }
  EXPECT_THAT(Error({"--loss-scaling=often"}),
              HasSubstr("--loss-scaling is 'often'; it must be automatic or "
                        "a number"));
  // Not offered: GradScaler's skipped updates are not supported in a
  // pipeline, and the example always pipelines.
  EXPECT_THAT(Error({"--loss-scaling=gradscaler"}),
              HasSubstr("which a pipeline does not support"));
}

TEST(TutorialFlagsTest, NamedValuesAreOneOfTheirNames) {
  EXPECT_EQ(Error({"--schedule=1F1B"}), "OK");
  EXPECT_EQ(Error({"--schedule=interleaved-1f1b"}), "OK");
  EXPECT_THAT(Error({"--schedule=zbv"}),
              HasSubstr("--schedule is 'zbv'; it must be grouped, "
                        "interleaved, gpipe, 1f1b, interleaved1f1b or "
                        "loopedbfs"));
  EXPECT_THAT(Error({"--schedule=sequential"}),
              HasSubstr("--strategy=sharded is the Sequential schedule"));
  EXPECT_THAT(Error({"--schedule=gpipe", "--strategy=sharded"}),
              HasSubstr("--schedule is 'gpipe' with --strategy=sharded"));
  EXPECT_THAT(Error({"--strategy=both"}),
              HasSubstr("--strategy is 'both'; it must be pipelined or "
                        "sharded"));
  EXPECT_THAT(Error({"--precision=bf16"}),
              HasSubstr("--precision is 'bf16'; it must be fp32 or fp16"));
  EXPECT_THAT(Error({"--stochastic-rounding=7"}),
              HasSubstr("--stochastic-rounding is '7'; it must be "
                        "replica_identical_only, on or off"));
  EXPECT_THAT(Error({"--loader-mode=-1"}),
              HasSubstr("--loader-mode is '-1'; it must be sync, async or "
                        "rebatched"));
  EXPECT_THAT(Error({"--profile", "--profile-dir="}),
              HasSubstr("--profile-dir is empty"));
  // Every violation at once, so a user does not fix them one run at a time.
  EXPECT_THAT(Error({"--batch-size=0", "--epochs=0", "--precision=x"}),
              AllOf(HasSubstr("--batch-size is 0"), HasSubstr("--epochs is 0"),
                    HasSubstr("--precision is 'x'")));
}

TEST(TutorialFlagsTest, ValuesThatDoNotParseAreErrorsNotExits) {
  EXPECT_THAT(Error({"--batch-size=abc"}),
              HasSubstr("flag --batch_size: 'abc'"));
  EXPECT_THAT(Error({"--batch-size=99999999999"}),
              HasSubstr("flag --batch_size: '99999999999'"));
  EXPECT_THAT(Error({"--seed=99999999999999999999"}), HasSubstr("flag --seed"));
  EXPECT_THAT(Error({"--nope=1"}), HasSubstr("unknown flag --nope"));
  EXPECT_THAT(Error({"--gtest_filter=*"}),
              HasSubstr("unknown flag --gtest_filter"));
  EXPECT_THAT(Error({"--batch-size"}), HasSubstr("is missing its value"));
  EXPECT_THAT(Error({"positional"}), HasSubstr("is not a flag"));
  EXPECT_EQ(Error({"--debug", "--nooffload-optimiser"}), "OK");
}

// Issue 24: checkpoints are taken between training calls, so their
// weight-update counts are whole calls; every refusal names the flag, the
// value and what would do.
TEST(TutorialFlagsTest, CheckpointFlags) {
  absl::StatusOr<TutorialFlags> f =
      Parse({"--checkpoint-dir=/tmp/c", "--checkpoint-every=20",
             "--keep-checkpoints=2", "--resume", "--stop-after=30"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->checkpoint_dir, "/tmp/c");
  EXPECT_EQ(f->checkpoint_every, 20);
  EXPECT_EQ(f->keep_checkpoints, 2);
  EXPECT_TRUE(f->resume);
  EXPECT_EQ(f->stop_after, 30);
  f = Parse({});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->checkpoint_dir, "");
  EXPECT_EQ(f->checkpoint_every, 0);
  EXPECT_EQ(f->keep_checkpoints, 3);
  EXPECT_FALSE(f->resume);
  // Not a multiple of --device-iterations (10): the nearest that are.
  EXPECT_THAT(Error({"--checkpoint-dir=/tmp/c", "--checkpoint-every=15"}),
              HasSubstr("--checkpoint-every is 15 weight updates, not a "
                        "multiple of --device-iterations (10): one training "
                        "call does 10 weight updates and checkpoints are "
                        "taken between calls; use 10 or 20"));
  EXPECT_THAT(Error({"--checkpoint-dir=/tmp/c", "--checkpoint-every=3"}),
              HasSubstr("use 10"));
  EXPECT_EQ(Error({"--checkpoint-dir=/tmp/c", "--checkpoint-every=3",
                   "--device-iterations=3"}),
            "OK");
  EXPECT_THAT(Error({"--stop-after=25"}),
              HasSubstr("--stop-after is 25 weight updates, not a multiple "
                        "of --device-iterations (10)"));
  EXPECT_THAT(Error({"--checkpoint-dir=/tmp/c", "--checkpoint-every=-10"}),
              HasSubstr("--checkpoint-every"));
  EXPECT_THAT(Error({"--stop-after=-1"}), HasSubstr("--stop-after"));
  EXPECT_THAT(
      Error({"--checkpoint-dir=/tmp/c", "--checkpoint-every=1099511627777"}),
      HasSubstr("1099511627776"));
  for (const char* keep : {"0", "-1", "1001"}) {
    EXPECT_THAT(Error({"--checkpoint-dir=/tmp/c",
                       absl::StrCat("--keep-checkpoints=", keep)}),
                AllOf(HasSubstr("--keep-checkpoints"), HasSubstr(keep),
                      HasSubstr("1000")));
  }
  EXPECT_THAT(Error({"--checkpoint-every=10"}),
              HasSubstr("--checkpoint-every needs --checkpoint-dir"));
  EXPECT_THAT(Error({"--resume"}),
              HasSubstr("--resume needs --checkpoint-dir"));
}

}  // namespace
}  // namespace ipuflow::examples
