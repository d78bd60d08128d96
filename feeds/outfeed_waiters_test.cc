// Every waiter is woken (issue 22, item 3): a monitor blocked in
// IPUOutfeedQueue::Next while no run is in progress ends with Cancelled
// naming the cause when nothing can feed the queue any more: the last
// executable that enqueues is destroyed, or the IPU system that owns it is
// destroyed, reconfigured or cancelled. Verdicts come from states (steps
// seen, readers waiting, a joined thread), never from durations: before
// the fix these tests hang in the join.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "core/ipu/device_program.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/test_system.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/control/loops.h"
#include "ops/math/cast.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::testing::AwaitTrue;

using ::testing::AllOf;
using ::testing::HasSubstr;

IPUConfig OneIpu() {
  IPUConfig config;
  config.set_auto_select_ipus(1);
  return config;
}

// A device loop of 2 iterations: dequeue x, outfeed x as float.
struct Loop {
  Loop() {
    infeed = std::move(IPUInfeedQueue::Create(Range(0, 1 << 20))).value();
    outfeed = std::move(IPUOutfeedQueue::Create()).value();
    Scope s = Scope::NewRootScope();
    IPUOutfeedQueue* out = outfeed.get();
    auto loop = loops::Repeat(
        s, 2,
        [out](const Scope& b, const std::vector<Output>& args) {
          out->Enqueue(b, {{"x", ops::Cast(b, args[0], DType::kFloat32)}});
          return std::vector<Output>{};
        },
        {}, infeed.get());
    IPU_CHECK_OK(loop.status());
    op = loop->op;
    graph = s.graph_ptr();
  }
  std::unique_ptr<DeviceProgram> Compile(IPUSystem* system) const {
    ProgramSpec spec;
    spec.targets = {op};
    return std::move(DeviceProgram::Compile(system, *graph, spec)).value();
  }
  std::unique_ptr<IPUInfeedQueue> infeed;
  std::unique_ptr<IPUOutfeedQueue> outfeed;
  std::shared_ptr<Graph> graph;
  Node* op = nullptr;
};

// Reads Next until it fails; `seen` counts the steps.
struct Monitor {
  explicit Monitor(IPUOutfeedQueue* q)
      : thread([this, q] {
          for (;;) {
            absl::StatusOr<OutfeedElement> step = q->Next();
            if (!step.ok()) {
              end = step.status();
              return;
            }
            values.push_back((*step)["x"].scalar<float>());
            seen.fetch_add(1);
          }
        }) {}
  // Until it has seen `n` steps and waits in Next for another.
  void AwaitBlockedAfter(int n, const IPUOutfeedQueue& q) {
    AwaitTrue([&] { return seen.load() == n && q.waiting_readers() == 1; });
  }
  std::atomic<int> seen{0};
  std::vector<float> values;
  absl::Status end;
  std::thread thread;
};

absl::Status RunOnce(Executable& exe) {
  std::vector<std::vector<Tensor>> results;
  return exe.Execute({{}}, &results);
}

TEST(OutfeedWaitersTest, TheLastExecutableDestroyedWakesAnIdleMonitor) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  std::unique_ptr<DeviceProgram> a = loop.Compile(system.get());
  std::unique_ptr<DeviceProgram> b = loop.Compile(system.get());
  ASSERT_TRUE(RunOnce(*a).ok());
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  a.reset();  // b can still feed the queue: the monitor keeps waiting.
  ASSERT_TRUE(RunOnce(*b).ok());
  monitor.AwaitBlockedAfter(4, *loop.outfeed);
  b.reset();
  monitor.thread.join();
  EXPECT_EQ(monitor.values, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
  EXPECT_THAT(std::string(monitor.end.message()),
              AllOf(HasSubstr("IPUOutfeedQueue '" + loop.outfeed->id() + "'"),
                    HasSubstr("no executable can feed it any more"),
                    HasSubstr("executable destroyed")));
}

TEST(OutfeedWaitersTest, DestroyingTheStrategyWakesAnIdleMonitor) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  auto strategy = std::make_unique<IPUStrategy>(system.get());
  ASSERT_TRUE(strategy->Run(*loop.graph, {}, {loop.op}).ok());
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  strategy.reset();
  monitor.thread.join();
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
  EXPECT_THAT(std::string(monitor.end.message()),
              HasSubstr("executable destroyed"));
}

// The system goes first (the executable, idle, is only destroyed after).
TEST(OutfeedWaitersTest, DestroyingTheSystemWakesAnIdleMonitor) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  std::unique_ptr<DeviceProgram> exe = loop.Compile(system.get());
  ASSERT_TRUE(RunOnce(*exe).ok());
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  system.reset();
  monitor.thread.join();
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
  EXPECT_THAT(std::string(monitor.end.message()),
              AllOf(HasSubstr("no executable can feed it any more"),
                    HasSubstr("IPU system destroyed")));
  exe.reset();
}

// After the reconfigure the strategy compiles again and the stream goes on:
// a new producer, so Next waits again.
TEST(OutfeedWaitersTest, ReconfiguringWakesAnIdleMonitorAndTheStreamGoesOn) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  IPUStrategy strategy(system.get());
  ASSERT_TRUE(strategy.Run(*loop.graph, {}, {loop.op}).ok());
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  ASSERT_TRUE(system->Configure(OneIpu()).ok());
  monitor.thread.join();
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
  EXPECT_THAT(std::string(monitor.end.message()),
              AllOf(HasSubstr("no executable can feed it any more"),
                    HasSubstr("IPU system reconfigured")));
  // Still nothing can feed it: Next says so at once.
  EXPECT_EQ(loop.outfeed->Next().status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(strategy.Run(*loop.graph, {}, {loop.op}).ok());
  Monitor again(loop.outfeed.get());
  again.AwaitBlockedAfter(2, *loop.outfeed);
  loop.outfeed->Close();
  again.thread.join();
  EXPECT_EQ(again.values, (std::vector<float>{2, 3}));
  EXPECT_EQ(again.end.code(), absl::StatusCode::kOutOfRange) << again.end;
}

TEST(OutfeedWaitersTest, CancellingTheSystemWakesAnIdleMonitor) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  std::unique_ptr<DeviceProgram> exe = loop.Compile(system.get());
  ASSERT_TRUE(RunOnce(*exe).ok());
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  system->cancellation()->StartCancel(
      absl::CancelledError("maintenance window"));
  monitor.thread.join();
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
  EXPECT_THAT(std::string(monitor.end.message()),
              AllOf(HasSubstr("no executable can feed it any more"),
                    HasSubstr("maintenance window")));
  // Compiled on the cancelled system: it cannot run, so Next does not wait.
  std::unique_ptr<DeviceProgram> late = loop.Compile(system.get());
  EXPECT_EQ(RunOnce(*late).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(loop.outfeed->Next().status().code(), absl::StatusCode::kCancelled);
}

// Steps held when the last producer goes still come out first; a run that
// a destroyed executable stopped reports its stop before the Cancelled.
TEST(OutfeedWaitersTest, HeldStepsComeOutBeforeTheCancelled) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  std::unique_ptr<DeviceProgram> exe = loop.Compile(system.get());
  ASSERT_TRUE(RunOnce(*exe).ok());
  exe.reset();
  Monitor monitor(loop.outfeed.get());
  monitor.thread.join();
  EXPECT_EQ(monitor.values, (std::vector<float>{0, 1}));
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled) << monitor.end;
}

// A monitor started before anything is compiled waits for the first
// executable (it may come): it is not woken with an error.
TEST(OutfeedWaitersTest, AMonitorWaitsForTheFirstExecutable) {
  auto system = std::move(IPUSystem::Create(OneIpu())).value();
  Loop loop;
  Monitor monitor(loop.outfeed.get());
  monitor.AwaitBlockedAfter(0, *loop.outfeed);
  std::unique_ptr<DeviceProgram> exe = loop.Compile(system.get());
  ASSERT_TRUE(RunOnce(*exe).ok());
  monitor.AwaitBlockedAfter(2, *loop.outfeed);
  exe.reset();
  monitor.thread.join();
  EXPECT_EQ(monitor.values, (std::vector<float>{0, 1}));
  EXPECT_EQ(monitor.end.code(), absl::StatusCode::kCancelled);
}

// A pipeline's outfeed: its executable (through its frame) is the
// producer, and destroying it wakes the idle monitor.
TEST(OutfeedWaitersTest, DestroyingAPipelinesExecutableWakesAnIdleMonitor) {
  namespace pt = pipelining::testing;
  auto init = pt::InitialValues(1);
  auto system = pt::MakeSystem(4);
  Scope scope = Scope::NewRootScope();
  auto infeed = std::move(IPUInfeedQueue::Create(pt::MicroBatches(8))).value();
  auto outfeed = std::move(IPUOutfeedQueue::Create()).value();
  pipelining::PipelineOptions o;
  o.computational_stages = pt::ModelStages(init);
  o.gradient_accumulation_count = 4;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.outfeed_loss = true;
  o.optimizer_function = pt::SgdCrossEntropy(0.1f);
  auto pipeline = pipelining::Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto strategy = std::make_unique<IPUStrategy>(system.get());
  ASSERT_TRUE(strategy->Initialize(*scope.graph()).ok());
  ASSERT_TRUE(pt::RunPipeline(*strategy, **pipeline).ok());
  std::atomic<int> seen{0};
  absl::Status end;
  std::thread monitor([&] {
    for (;;) {
      absl::StatusOr<OutfeedElement> step = outfeed->Next();
      if (!step.ok()) {
        end = step.status();
        return;
      }
      seen.fetch_add(1);
    }
  });
  // Next waits (the reader count) only once the held steps are taken.
  AwaitTrue([&] { return outfeed->waiting_readers() == 1; });
  EXPECT_GT(seen.load(), 0);
  strategy.reset();
  monitor.join();
  EXPECT_EQ(end.code(), absl::StatusCode::kCancelled) << end;
  EXPECT_THAT(std::string(end.message()),
              AllOf(HasSubstr("no executable can feed it any more"),
                    HasSubstr("executable destroyed")));
}

}  // namespace
}  // namespace ipuflow::feeds
