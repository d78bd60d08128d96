// The main example's checkpoints under mpirun (docs/CHECKPOINTS.md, "More
// than one process"): 2 processes x 1 replica train the float16 pipeline
// with stochastic rounding; a run stopped after 4 of its 10 weight updates
// (--stop-after) and resumed by new processes (--resume, a second mpirun)
// ends with bitwise every process's tensors of the uninterrupted run's last
// checkpoint (the shared file and both parts), the same loss and test
// accuracy. Another process count is refused, naming both.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/process_parts.h"
#include "examples/example_run.h"
#include "gtest/gtest.h"

namespace {

using ::ipuflow::examples::testing::ExampleResult;
using ::ipuflow::examples::testing::ExpectSameResults;

// The example under `mpirun -np <np>` with the flags of
// core/distributed/mpirun_test.sh.
ExampleResult RunExample(int np, const std::string& flags) {
  return ::ipuflow::examples::testing::RunMainExample(
      flags, absl::StrCat("mpirun -np ", np,
                          " --oversubscribe --allow-run-as-root --bind-to none "
                          "--mca btl self,vader --mca "
                          "btl_vader_single_copy_mechanism none"));
}

class MpiExampleCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Open MPI keeps allocations until exit (core/distributed/
    // mpirun_test.sh): leaks stay checked by the single-process tests.
    if (const char* asan = std::getenv("ASAN_OPTIONS")) {
      setenv("ASAN_OPTIONS", absl::StrCat(asan, ":detect_leaks=0").c_str(), 1);
    }
    // Each example process is not a test: no XML report of its own.
    unsetenv("XML_OUTPUT_FILE");
    unsetenv("TEST_PREMATURE_EXIT_FILE");
  }
};

TEST_F(MpiExampleCheckpointTest, StoppedAndResumedRunEndsBitwiseAsOneRun) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = absl::StrCat(tmp ? tmp : "/tmp", "/mpi_resume");
  const std::string whole_dir = root + "/whole", parts_dir = root + "/parts";
  const std::string flags =
      "--replication-factor 1 --gradient-accumulation 10 --train-limit 8000 "
      "--test-limit 1600 --device-iterations 2 --checkpoint-every 2 "
      "--keep-checkpoints 2 "
      "--precision fp16 --stochastic-rounding on --checkpoint-dir ";
  ExampleResult whole = RunExample(2, flags + whole_dir);
  ASSERT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  EXPECT_NE(whole.out.find("Checkpoints: 5 saved in " + whole_dir +
                           " (the newest 2 kept)"),
            std::string::npos)
      << whole.out;
  ExampleResult first = RunExample(2, flags + parts_dir + " --stop-after 4");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("Stopped after 4 weight updates (--stop-after)"),
            std::string::npos)
      << first.out;
  ExampleResult rest = RunExample(2, flags + parts_dir + " --resume");
  ASSERT_EQ(rest.exit_code, 0) << rest.out << rest.err;
  EXPECT_NE(rest.out.find("Resuming from " + parts_dir +
                          "/ckpt-000000000004.ipuckpt (weight update 4)"),
            std::string::npos)
      << rest.out;
  // The last 50 micro-batches are the resumed run's: the same losses.
  ASSERT_NO_FATAL_FAILURE(ExpectSameResults(whole, rest));
  // Every tensor of the final checkpoints, as each process reads them.
  for (int p = 0; p < 2; ++p) {
    SCOPED_TRACE(absl::StrCat("process ", p));
    auto a = ipuflow::checkpoint::ReadCheckpoint(
        ipuflow::checkpoint::NumberedCheckpointPath(whole_dir, 10), p, 2);
    auto b = ipuflow::checkpoint::ReadCheckpoint(
        ipuflow::checkpoint::NumberedCheckpointPath(parts_dir, 10), p, 2);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    ASSERT_GT(a->tensors.size(), 8u);  // Weights, masters, AdamW, scale.
    for (size_t i = 0; i < a->tensors.size(); ++i) {
      const auto& ea = a->manifest.tensors(i);
      const auto& eb = b->manifest.tensors(i);
      EXPECT_EQ(ea.name(), eb.name());
      EXPECT_EQ(ea.replica(), eb.replica());
      ASSERT_EQ(a->tensors[i].TotalBytes(), b->tensors[i].TotalBytes());
      EXPECT_EQ(std::memcmp(a->tensors[i].raw_data(), b->tensors[i].raw_data(),
                            a->tensors[i].TotalBytes()),
                0)
          << ea.name() << " replica " << ea.replica();
    }
    EXPECT_EQ(a->manifest.part().process(), p);
  }
  // Two kept, each with both parts; no other file.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(whole_dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2 * 3);
}

TEST_F(MpiExampleCheckpointTest, AnotherProcessCountIsRefused) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/mpi_refusal");
  const std::string flags =
      "--train-limit 4000 --test-limit 1600 --device-iterations 2 "
      "--checkpoint-dir " +
      dir;
  ExampleResult saved =
      RunExample(2, "--replication-factor 1 --stop-after 2 " + flags);
  ASSERT_EQ(saved.exit_code, 0) << saved.out << saved.err;
  // One process with 2 replicas: the same global replicas, another process
  // count.
  ExampleResult one = RunExample(1, "--replication-factor 2 --resume " + flags);
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.err.find("was saved by 2 process(es); this run has 1"),
            std::string::npos)
      << one.err;
}

}  // namespace
