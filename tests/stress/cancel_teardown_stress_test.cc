// Stress (issue 9, section 3): 1,000 randomly timed cancels and teardowns
// of device loops and pipelines. Each iteration builds a system, queues and
// a loop (or a pipeline), starts it with a monitor thread reading the
// outfeed, and after a random delay (0-3 ms) stops it: cancels the system,
// reconfigures it (a reset) or destroys the infeed mid-run (loops), or
// cancels the system (pipelines). Every run returns (Cancelled for a cancel
// or reset; an error naming the infeed when it is destroyed), the monitor
// sees a prefix of the stream (nothing reordered or repeated) and wakes,
// everything is torn down in a random legal order, and the thread count
// ends where it started. A watchdog fails the test, naming the iteration,
// after 120 s without progress. IPUFLOW_STRESS_ITERATIONS shortens a run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/array/identity.h"
#include "ops/control/loops.h"
#include "pipelining/pipeline.h"
#include "tests/stress/proc_status.h"
#include "tests/stress/watchdog.h"

namespace ipuflow::stress {
namespace {

std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  return std::move(IPUSystem::Create(config)).value();
}

// Reads the outfeed until it stops; checks the values count up from 0.
struct Monitor {
  feeds::IPUOutfeedQueue* outfeed;
  std::string name;
  int64_t seen = 0;
  std::string error;  // Ordering violations.
  absl::Status end;   // Why Next stopped.
  std::thread thread;

  Monitor(feeds::IPUOutfeedQueue* q, std::string n)
      : outfeed(q), name(std::move(n)) {
    thread = std::thread([this] {
      while (true) {
        absl::StatusOr<feeds::OutfeedElement> step = outfeed->Next();
        if (!step.ok()) {
          end = step.status();
          return;
        }
        const int64_t v = (*step)[name].data<int64_t>()[0];
        if (v != seen && error.empty()) {
          error = absl::StrCat("step ", seen, " carried element ", v);
        }
        ++seen;
      }
    });
  }
};

enum class Stop { kCancel, kReconfigure, kDestroyInfeed };
const char* StopName(Stop s) {
  switch (s) {
    case Stop::kCancel:
      return "cancel";
    case Stop::kReconfigure:
      return "reconfigure";
    case Stop::kDestroyInfeed:
      return "destroy infeed";
  }
  return "?";
}

struct Tally {
  std::map<std::string, int> outcomes;  // "<kind> <stop>: <code>".
  int stopped = 0;                      // Runs that ended early.
  int64_t steps = 0;                    // Outfeed steps seen.
};

void LoopIteration(std::mt19937& rng, Watchdog& dog, int i, Tally* tally) {
  const Stop stop = static_cast<Stop>(rng() % 3);
  const int delay_us = static_cast<int>(rng() % 3000);
  dog.Progress(absl::StrCat("iteration ", i, ": loop, ", StopName(stop),
                            " after ", delay_us, " us"));
  auto system = MakeSystem(1);
  auto infeed = std::move(feeds::IPUInfeedQueue::Create(
                              feeds::Range(0, 1 << 30), 1 + rng() % 4))
                    .value();
  auto outfeed = std::move(feeds::IPUOutfeedQueue::Create(
                               feeds::OutfeedMode::kAll, 1 + rng() % 4))
                     .value();
  Scope s = Scope::NewRootScope();
  auto loop = loops::Repeat(
      s, 1 << 30,
      [&](const Scope& b, const std::vector<Output>& args) {
        outfeed->Enqueue(b, {{"x", ops::Identity(b, args[0])}});
        return std::vector<Output>{};
      },
      {}, infeed.get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto strategy = std::make_unique<IPUStrategy>(system.get());
  // Compiled before the stop can come: a strategy's Run after a reconfigure
  // would compile for the new system and run its 2^30 steps (on a loaded
  // machine the runner thread may start after a short delay's stop).
  absl::StatusOr<DeviceProgram*> exe =
      strategy->Compile(*s.graph(), {}, {loop->op});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Monitor monitor(outfeed.get(), "x");
  absl::Status run;
  std::thread runner([&] {
    std::vector<std::vector<Tensor>> results;
    run = (*exe)->Execute({{}}, &results);
  });
  std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  switch (stop) {
    case Stop::kCancel:
      system->cancellation()->StartCancel(absl::CancelledError("stress"));
      break;
    case Stop::kReconfigure: {
      IPUConfig config;
      config.set_auto_select_ipus(1);
      EXPECT_TRUE(system->Configure(config).ok());
      break;
    }
    case Stop::kDestroyInfeed:
      infeed.reset();
      break;
  }
  runner.join();
  dog.Progress(absl::StrCat("iteration ", i, ": loop stopped (", run.ToString(),
                            "); waiting for the monitor"));
  outfeed->Close();  // The documented way to end a monitor.
  monitor.thread.join();
  EXPECT_FALSE(run.ok()) << "iteration " << i << ": 2^30 steps finished?";
  if (stop != Stop::kCancel) {
    // Destroyed infeed: FailedPrecondition naming it once the run reaches
    // it. Reset before the run started: FailedPrecondition "compiled before
    // the IPU system was reconfigured; compile it again".
    EXPECT_TRUE(absl::IsCancelled(run) || absl::IsFailedPrecondition(run))
        << "iteration " << i << ": " << run;
  } else {
    EXPECT_TRUE(absl::IsCancelled(run)) << "iteration " << i << ": " << run;
  }
  EXPECT_EQ(monitor.error, "") << "iteration " << i;
  tally->outcomes[absl::StrCat("loop ", StopName(stop), ": ",
                               absl::StatusCodeToString(run.code()))]++;
  tally->stopped += !run.ok();
  tally->steps += monitor.seen;
  // Teardown in a random order (the strategy before its system).
  dog.Progress(absl::StrCat("iteration ", i, ": loop teardown"));
  switch (rng() % 3) {
    case 0:
      strategy.reset();
      system.reset();
      outfeed.reset();
      infeed.reset();
      break;
    case 1:
      infeed.reset();
      outfeed.reset();
      strategy.reset();
      system.reset();
      break;
    default:
      outfeed.reset();
      strategy.reset();
      infeed.reset();
      system.reset();
      break;
  }
}

// Two pass-through stages (inference); the outfeed gets the element.
void PipelineIteration(std::mt19937& rng, Watchdog& dog, int i, Tally* tally) {
  const int delay_us = static_cast<int>(rng() % 3000);
  dog.Progress(absl::StrCat("iteration ", i, ": pipeline, cancel after ",
                            delay_us, " us"));
  auto system = MakeSystem(2);
  auto strategy = std::make_unique<IPUStrategy>(system.get());
  auto infeed = std::move(feeds::IPUInfeedQueue::Create(
                              feeds::Range(0, 1 << 30), 1 + rng() % 4))
                    .value();
  auto outfeed = std::move(feeds::IPUOutfeedQueue::Create()).value();
  Scope s = Scope::NewRootScope();
  pipelining::PipelineOptions o;
  o.computational_stages = {
      [](const Scope& sc, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(sc, a[0])};
      },
      [](const Scope& sc, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(sc, a[0])};
      }};
  o.gradient_accumulation_count = 4;
  o.repeat_count = 1 << 28;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.pipeline_schedule = rng() % 2 ? pipelining::PipelineSchedule::kGrouped
                                  : pipelining::PipelineSchedule::kSequential;
  auto pipeline = pipelining::Pipeline::Create(s, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  Monitor monitor(outfeed.get(), "0");
  absl::Status run;
  std::thread runner([&] {
    run = strategy->Run(*s.graph(), {}, {(*pipeline)->frame()}).status();
  });
  std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  system->cancellation()->StartCancel(absl::CancelledError("stress"));
  runner.join();
  dog.Progress(absl::StrCat("iteration ", i, ": pipeline stopped (",
                            run.ToString(), "); waiting for the monitor"));
  outfeed->Close();
  monitor.thread.join();
  EXPECT_TRUE(absl::IsCancelled(run)) << "iteration " << i << ": " << run;
  EXPECT_EQ(monitor.error, "") << "iteration " << i;
  tally->outcomes[absl::StrCat("pipeline cancel: ",
                               absl::StatusCodeToString(run.code()))]++;
  tally->stopped += !run.ok();
  tally->steps += monitor.seen;
  dog.Progress(absl::StrCat("iteration ", i, ": pipeline teardown"));
  // The strategy (its programs) before the system, the pipeline before or
  // after its programs; queues after its run.
  if (rng() % 2) {
    pipeline->reset();
    strategy.reset();
    system.reset();
    outfeed.reset();
    infeed.reset();
  } else {
    outfeed.reset();
    infeed.reset();
    strategy.reset();
    pipeline->reset();
    system.reset();
  }
}

TEST(CancelTeardownStressTest, ThousandRandomStopsNeverHangOrLeakThreads) {
  const int iterations =
      static_cast<int>(EnvInt("IPUFLOW_STRESS_ITERATIONS", 1000));
  Watchdog dog(std::chrono::seconds(120));
  std::mt19937 rng(2026);
  Tally tally;
  // One of each first: the process's lazily created threads exist after.
  LoopIteration(rng, dog, -2, &tally);
  PipelineIteration(rng, dog, -1, &tally);
  const ProcStatus before = ReadProcStatus();
  const auto t0 = std::chrono::steady_clock::now();
  int max_threads = before.threads;
  for (int i = 0; i < iterations && !HasFatalFailure(); ++i) {
    if (i % 2 == 0) {
      LoopIteration(rng, dog, i, &tally);
    } else {
      PipelineIteration(rng, dog, i, &tally);
    }
    max_threads = std::max(max_threads, ReadProcStatus().threads);
  }
  const ProcStatus after = ReadProcStatus();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf(
      "%d iterations in %.1f s: %d runs stopped early, %lld outfeed "
      "steps read by monitors\n",
      iterations, seconds, tally.stopped, static_cast<long long>(tally.steps));
  for (const auto& [what, count] : tally.outcomes) {
    std::printf("  %-40s %d\n", what.c_str(), count);
  }
  std::printf(
      "threads: %d before, %d after (max between iterations %d); "
      "VmRSS %lld KiB before, %lld KiB after\n",
      before.threads, after.threads, max_threads,
      static_cast<long long>(before.rss_kib),
      static_cast<long long>(after.rss_kib));
  EXPECT_EQ(after.threads, before.threads) << "threads leaked";
}

}  // namespace
}  // namespace ipuflow::stress
