// The case bazel/tsan_suppressions.cc exists for, reproduced: a Status with
// a message shared by two threads, read by one, freed by the other after a
// reference-count handshake inside uninstrumented Abseil. Under --config=tsan
// this test fails (a race report, halt_on_error) unless the suppression is
// linked in; in other builds it only checks the message.
#include <atomic>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace {

TEST(AbslStatusTsanTest, AStatusSharedAcrossThreadsIsFreedWithoutAReport) {
  absl::Status shared = absl::CancelledError("queue closed");
  std::atomic<bool> dropped{false};
  std::thread reader([copy = shared, &dropped]() mutable {
    EXPECT_NE(copy.message().find("closed"), std::string_view::npos);
    copy = absl::OkStatus();  // Unref in libabsl_status: TSan sees no edge.
    // Relaxed, so the only ordering is Abseil's own, as in the real case.
    dropped.store(true, std::memory_order_relaxed);
  });
  while (!dropped.load(std::memory_order_relaxed)) std::this_thread::yield();
  shared = absl::OkStatus();  // The last reference: frees the message.
  reader.join();
}

}  // namespace
