// Run under `mpirun -np P` with one test each (//core/distributed:
// mpi_failure_notice_test, mpi_stall_test): a failure ends every process's
// wait. Each test breaks the link, hence one per run.
//   FailureIsToldToTheOthers: the last process's collective is cancelled
//     while it waits in the link (its `cancelled` turns non-OK after it has
//     polled); every other process, waiting in a collective the last one
//     never joins, ends with Aborted naming it and its error, long before
//     the stall timer (60 s) could.
//   StallIsReported: process 0 waits for a collective nobody else joins and
//     ends with DeadlineExceeded naming the collective and process 1.
#include <atomic>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/distributed/mpi_link.h"
#include "gtest/gtest.h"

namespace ipuflow::distributed {
namespace {

absl::Duration stall_timeout = absl::Seconds(60);

std::shared_ptr<MpiLink> Link() {
  MpiLink::Options options;
  options.stall_timeout = stall_timeout;
  static std::shared_ptr<MpiLink> link = *MpiLink::World(options);
  return link;
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

}  // namespace
}  // namespace ipuflow::distributed

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    int seconds = 0;
    const std::string a = argv[i];
    if (a.rfind("--stall_seconds=", 0) == 0 &&
        absl::SimpleAtoi(a.substr(16), &seconds)) {
      ipuflow::distributed::stall_timeout = absl::Seconds(seconds);
    }
  }
  return RUN_ALL_TESTS();
}
