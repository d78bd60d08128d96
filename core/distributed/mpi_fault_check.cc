// Run under `mpirun -np P` with one test each by mpi_fault_test.sh
// (//core/distributed:mpi_*_test): a failure ends every process's wait,
// and the job. Each test breaks the link, hence one per run; the job then
// ends with MPI_Abort, so a test whose every process checks something
// writes its verdict to a file (--verdict_dir) and waits for the others'.
//   FailureIsToldToTheOthers: the last process's collective is cancelled
//     while it waits in the link (its `cancelled` turns non-OK after it has
//     polled); every other process, waiting in a collective the last one
//     never joins, ends with Aborted naming it and its error, long before
//     the stall timer (60 s) could.
//   StallIsReported: process 0 waits for a collective nobody else joins and
//     ends with DeadlineExceeded naming the collective and process 1.
//   DisagreeingOnSizeIsAnError: the processes all-reduce tensors of
//     different sizes: an error naming the collective.
//   FaultEndsTheJob: every process all-reduces step after step; the last
//     one commits --fault (sleeps, is killed, exits with status 3, refuses
//     its identity, ...; mpi_fault_test.sh lists them). The script checks
//     how the job ends.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "core/ipu/collective_group.h"
#include "gtest/gtest.h"

namespace ipuflow::distributed {
namespace {

absl::Duration stall_timeout = absl::Seconds(60);
absl::Duration start_timeout = absl::Seconds(60);
std::string fault;

MpiLink::Options LinkOptions() {
  MpiLink::Options options;
  options.stall_timeout = stall_timeout;
  options.start_timeout = start_timeout;
  return options;
}

using Op = CollectiveGroup::ReduceOp;

std::shared_ptr<MpiLink> Link() {
  static std::shared_ptr<MpiLink> link = *MpiLink::World(LinkOptions());
  return link;
}

// What Open MPI told this process (for a fault before MpiLink::World).
int LauncherInt(const char* name) {
  int v = -1;
  const char* text = std::getenv(name);
  if (text == nullptr || !absl::SimpleAtoi(text, &v)) {
    ADD_FAILURE() << name << " is not set: run under mpirun";
  }
  return v;
}

[[noreturn]] void SleepForever() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

ProcessLink::Collective Over(uint64_t tag, const std::string& name,
                             const std::vector<int>& processes,
                             const float* in) {
  ProcessLink::Collective c;
  c.tag = tag;
  c.name = name;
  c.member_process = processes;
  c.n = 4;
  c.local = {in};
  c.cancelled = [] { return absl::OkStatus(); };
  return c;
}

TEST(MpiFaultTest, FailureIsToldToTheOthers) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  ASSERT_GE(P, 2);
  const float in[4] = {1, 2, 3, 4};
  float out[4];
  std::vector<int> all(P);
  for (int p = 0; p < P; ++p) all[p] = p;
  if (me == P - 1) {
    // Waits for the others' partial sums, which never come ("joined"
    // below is a different collective); cancelled once it polled a while.
    ProcessLink::Collective c = Over(1, "joined", all, in);
    std::atomic<int> polls{0};
    c.cancelled = [&]() -> absl::Status {
      return ++polls > 100 ? absl::CancelledError("replica 0 failed: boom")
                           : absl::OkStatus();
    };
    absl::Status s = link->FoldAcross(c, false, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  } else {
    ProcessLink::Collective c = Over(2, "never joined", all, in);
    absl::Status s = link->FoldAcross(c, false, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
    EXPECT_NE(s.message().find(absl::StrCat("process ", P - 1, " failed")),
              std::string::npos)
        << s;
    EXPECT_NE(s.message().find("replica 0 failed: boom"), std::string::npos)
        << s;
  }
  // Broken now: the next call fails at once with the first error.
  EXPECT_FALSE(link->FoldAcross(Over(3, "later", all, in), false, out).ok());
}

TEST(MpiFaultTest, StallIsReported) {
  auto link = Link();
  ASSERT_GE(link->process_count(), 2);
  if (link->process_index() != 0) return;  // Never joins.
  const float in[4] = {1, 2, 3, 4};
  float out[4];
  absl::Status s =
      link->FoldAcross(Over(4, "lonely/sum", {0, 1}, in), false, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("lonely/sum"), std::string::npos) << s;
  EXPECT_NE(s.message().find("process 1"), std::string::npos) << s;
}

TEST(MpiFaultTest, DisagreeingOnSizeIsAnError) {
  auto link = Link();
  ASSERT_GE(link->process_count(), 2);
  CollectiveGroup across(1, link, /*program_tag=*/9);
  const int64_t n = 10 + link->process_index();
  Tensor in(DType::kFloat32, TensorShape({n})),
      out(DType::kFloat32, TensorShape({n}));
  std::memset(in.raw_data(), 0, in.TotalBytes());
  absl::Status s = across.AllReduce(0, "mismatch", in, out, Op::kSum);
  // The chain's first process sends 40 bytes to one that expects 44:
  // whichever process sees it first says so, the others hear of it.
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("mismatch"), std::string::npos) << s;
}

TEST(MpiFaultTest, FaultEndsTheJob) {
  const int rank = LauncherInt("OMPI_COMM_WORLD_RANK");
  const int size = LauncherInt("OMPI_COMM_WORLD_SIZE");
  const bool last = rank == size - 1;
  if (last && fault == "sleep_before_start") SleepForever();
  if (last && (fault == "refuse" || fault == "refuse_then_sleep")) {
    setenv("OMPI_COMM_WORLD_RANK", "0", /*overwrite=*/1);
  }
  auto link = MpiLink::World(LinkOptions());
  if (!link.ok()) {
    std::fprintf(stderr, "process %d: %s\n", rank,
                 link.status().ToString().c_str());
    if (last && fault == "refuse_then_sleep") SleepForever();
    return;  // Refused: exits 0, the refusal ends the job.
  }
  const float in[4] = {1, 2, 3, 4};
  float out[4];
  std::vector<int> all(size);
  for (int p = 0; p < size; ++p) all[p] = p;
  for (int step = 0;; ++step) {
    if (last && step == 3) {
      if (fault == "sleep") SleepForever();
      if (fault == "kill") std::raise(SIGKILL);
      if (fault == "error") std::exit(3);  // As main returning 3.
    }
    absl::Status s = (*link)->FoldAcross(Over(5, "step", all, in), false, out);
    if (!s.ok()) {
      std::fprintf(stderr, "process %d, step %d: %s\n", rank, step,
                   s.ToString().c_str());
      return;
    }
    if (fault == "none" && step == 5) return;
  }
}

}  // namespace
}  // namespace ipuflow::distributed

// gtest's verdict in DIR/verdict.<rank>; returns once every process's is
// there. The first process to exit with a broken link ends the job, which
// must not cut another's checks short.
void AwaitVerdicts(const std::string& dir, int verdict) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  int n = 0;
  if (rank == nullptr || size == nullptr || !absl::SimpleAtoi(size, &n)) return;
  const std::string mine = absl::StrCat(dir, "/verdict.", rank);
  std::ofstream(mine + ".tmp") << verdict;
  std::filesystem::rename(mine + ".tmp", mine);  // Whole or absent.
  for (int p = 0; p < n; ++p) {
    // The script's hang guard bounds this wait.
    while (!std::filesystem::exists(absl::StrCat(dir, "/verdict.", p))) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string verdict_dir;
  for (int i = 1; i < argc; ++i) {
    int seconds = 0;
    const std::string a = argv[i];
    auto flag = [&](const std::string& name) -> const char* {
      return a.rfind(name, 0) == 0 ? argv[i] + name.size() : nullptr;
    };
    if (const char* v = flag("--stall_seconds=");
        v != nullptr && absl::SimpleAtoi(v, &seconds)) {
      ipuflow::distributed::stall_timeout = absl::Seconds(seconds);
    } else if (const char* v = flag("--start_seconds=");
               v != nullptr && absl::SimpleAtoi(v, &seconds)) {
      ipuflow::distributed::start_timeout = absl::Seconds(seconds);
    } else if (const char* v = flag("--fault=")) {
      ipuflow::distributed::fault = v;
    } else if (const char* v = flag("--verdict_dir=")) {
      verdict_dir = v;
    }
  }
  const int verdict = RUN_ALL_TESTS();
  if (!verdict_dir.empty()) AwaitVerdicts(verdict_dir, verdict);
  return verdict;
}
