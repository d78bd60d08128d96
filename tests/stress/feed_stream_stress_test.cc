// Stress (issue 9, section 3): 10^7 elements through an infeed, one device
// loop and an outfeed, read by a concurrent consumer. Every element arrives
// once and in order; resident memory and the thread count stay flat
// between an early and a late checkpoint (the host-side outfeed list and
// the rings are bounded, nothing leaks per element). Prints elements/s and
// the checkpoints. IPUFLOW_STRESS_ELEMENTS shortens a run by hand.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/control/loops.h"
#include "tests/stress/proc_status.h"

namespace ipuflow::stress {
namespace {

using Clock = std::chrono::steady_clock;

TEST(FeedStreamStressTest, TenMillionElementsOnceInOrderWithFlatMemory) {
  const int64_t n = EnvInt("IPUFLOW_STRESS_ELEMENTS", 10000000);
  ASSERT_GE(n, 10);
  IPUConfig config;
  config.set_auto_select_ipus(1);
  auto system = std::move(IPUSystem::Create(config)).value();
  auto infeed =
      std::move(feeds::IPUInfeedQueue::Create(feeds::Range(0, n), 8)).value();
  auto outfeed = std::move(feeds::IPUOutfeedQueue::Create()).value();
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(
      s, static_cast<int>(n),
      [&](const Scope& b, const std::vector<Output>& args) {
        outfeed->Enqueue(b, {{"x", args[0]}});
        return std::vector<Output>{};
      },
      {}, infeed.get());
  ASSERT_TRUE(loop.ok()) << loop.status();

  // Checkpoints at 10%, 20%, ... of the stream, taken by the consumer.
  struct Checkpoint {
    int64_t elements;
    double seconds;
    ProcStatus st;
  };
  std::vector<Checkpoint> checkpoints;
  int64_t received = 0;
  std::string first_error;
  const Clock::time_point t0 = Clock::now();
  std::thread consumer([&] {
    while (received < n) {
      absl::StatusOr<feeds::OutfeedElement> step = outfeed->Next();
      if (!step.ok()) {
        first_error = std::string(step.status().message());
        return;
      }
      const int64_t v = (*step)["x"].scalar<int64_t>();
      if (v != received) {
        first_error = "element " + std::to_string(received) + " was " +
                      std::to_string(v) + " (lost, duplicated or reordered)";
        return;
      }
      ++received;
      if (received % (n / 10) == 0) {
        checkpoints.push_back(
            {received, std::chrono::duration<double>(Clock::now() - t0).count(),
             ReadProcStatus()});
      }
    }
  });
  IPUStrategy strategy(system.get());
  absl::Status run = strategy.Run(*s.graph(), {}, {loop->op}).status();
  if (!run.ok()) outfeed->Close();  // Let the consumer stop.
  consumer.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(first_error, "");
  EXPECT_EQ(received, n);
  std::printf("%lld elements in %.1f s: %.0f elements/s\n",
              static_cast<long long>(received), seconds, received / seconds);
  for (const Checkpoint& c : checkpoints) {
    std::printf("  at %9lld elements (%6.1f s): VmRSS %7lld KiB, %d threads\n",
                static_cast<long long>(c.elements), c.seconds,
                static_cast<long long>(c.st.rss_kib), c.st.threads);
  }
  ASSERT_GE(checkpoints.size(), 9u);
  // Early: after 10% (warm); late: after 90%. Bounded growth: 16 MiB is far
  // below what one leaked or buffered byte per element would cost (10 MB
  // per byte at 10^7).
  const Checkpoint& early = checkpoints[0];
  const Checkpoint& late = checkpoints[8];
  EXPECT_LE(late.st.rss_kib - early.st.rss_kib, 16 * 1024)
      << "VmRSS grew from " << early.st.rss_kib << " KiB to " << late.st.rss_kib
      << " KiB";
  EXPECT_EQ(late.st.threads, early.st.threads);
}

}  // namespace
}  // namespace ipuflow::stress
