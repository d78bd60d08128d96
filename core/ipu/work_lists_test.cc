// WorkLists: items on two IPUs connected by a channel run in list order,
// the engine pops and pushes their channels (the item function sees only
// values), channels are sized by replaying the table's order, an item's
// error stops the run with the root cause (waking a blocked producer), and
// a list whose IPU is the calling thread's runs inline.
#include "core/ipu/work_lists.h"

#include <atomic>
#include <vector>

#include "core/ipu/ipu_system.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

std::unique_ptr<IPUSystem> TwoIpus() {
  IPUConfig config;
  config.set_auto_select_ipus(2);
  return std::move(IPUSystem::Create(config)).value();
}

// IPU 0 pushes m = 0..n-1 to "a"; IPU 1 pops them. `order` gives the
// table's order: all producers first, or producer/consumer interleaved.
WorkLists Lists(IPUSystem& system, int n, bool producers_first) {
  std::vector<std::vector<WorkListItem>> lists(2);
  for (int m = 0; m < n; ++m) {
    WorkListItem p, c;
    p.ipu = 0;
    p.step = m;
    p.tag = m;
    p.order = producers_first ? m : 2 * m;
    p.pushes = {"a"};
    c.ipu = 1;
    c.step = producers_first ? n + m : m;
    c.tag = n + m;
    c.order = producers_first ? n + m : 2 * m + 1;
    c.pops = {"a"};
    c.label = "consumer " + std::to_string(m);
    lists[0].push_back(p);
    lists[1].push_back(c);
  }
  return WorkLists({&system.device(0), &system.device(1)}, std::move(lists),
                   /*lockstep=*/false);
}

TEST(WorkListsTest, ChannelsAreSizedByTheTablesOrder) {
  auto system = TwoIpus();
  WorkLists first = Lists(*system, 3, /*producers_first=*/true);
  first.SizeChannels();
  EXPECT_EQ(first.channel("a")->capacity(), 3u);
  WorkLists interleaved = Lists(*system, 3, /*producers_first=*/false);
  interleaved.SizeChannels();
  EXPECT_EQ(interleaved.channel("a")->capacity(), 1u);
}

TEST(WorkListsTest, ItemsRunInListOrderOnTheirIpus) {
  auto system = TwoIpus();
  WorkLists lists = Lists(*system, 4, /*producers_first=*/false);
  lists.SizeChannels();
  std::vector<float> got;
  std::atomic<int> wrong_thread{0};
  WorkListsRun run(nullptr, 2);
  const absl::Status s = lists.Run(
      run,
      [&](const WorkListItem& it, std::vector<ChannelMessage>& popped,
          std::vector<ItemPush>* pushes, WorkItemClock* clock) {
        if (IPUDevice::Current() != &system->device(it.ipu)) ++wrong_thread;
        clock->cpu = 1;  // One virtual second per item.
        if (it.ipu == 0) {
          EXPECT_TRUE(popped.empty());
          pushes->push_back({{Tensor::Scalar<float>(it.tag)}});
        } else {
          EXPECT_EQ(popped.size(), 1u);
          // Stamped by the engine with the producer's virtual end.
          EXPECT_DOUBLE_EQ(popped[0].virtual_time, it.tag - 4 + 1);
          got.push_back(popped[0].values[0].scalar<float>());
        }
        return absl::OkStatus();
      },
      "replica 0");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(wrong_thread, 0);
  // IPU 1's item m waits for producer m's end (m + 1) and then costs 1.
  ASSERT_EQ(run.timings[1].size(), 4u);
  EXPECT_DOUBLE_EQ(run.timings[1][3].end, 5);
  EXPECT_DOUBLE_EQ(run.vclock[0], 4);
}

TEST(WorkListsTest, AnItemErrorStopsTheRunWithTheRootCause) {
  auto system = TwoIpus();
  // Capacity 1: the producer blocks on its second push until cancelled.
  WorkLists lists = Lists(*system, 3, /*producers_first=*/false);
  lists.SizeChannels();
  WorkListsRun run(nullptr, 2);
  const std::vector<int> tokens = lists.CancelChannelsWith(run.cancel);
  const absl::Status s = lists.Run(
      run,
      [&](const WorkListItem& it, std::vector<ChannelMessage>&,
          std::vector<ItemPush>* pushes, WorkItemClock*) -> absl::Status {
        if (it.ipu == 0) {
          pushes->push_back({{Tensor::Scalar<float>(it.tag)}});
          return absl::OkStatus();
        }
        return absl::InvalidArgumentError("bad value");
      },
      "replica 0");
  for (int t : tokens) run.cancel->Unregister(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), "consumer 0: bad value");
  EXPECT_TRUE(run.cancel->cancelled());
  EXPECT_NE(run.cancel->reason().message().find(
                "run cancelled: replica 0 failed: consumer 0: bad value"),
            std::string::npos)
      << run.cancel->reason();
}

TEST(WorkListsTest, AnUntimedPushDoesNotHoldItsReaderBack) {
  auto system = TwoIpus();
  WorkLists lists = Lists(*system, 2, /*producers_first=*/false);
  lists.SizeChannels();
  WorkListsRun run(nullptr, 2);
  const absl::Status s = lists.Run(
      run,
      [&](const WorkListItem& it, std::vector<ChannelMessage>& popped,
          std::vector<ItemPush>* pushes, WorkItemClock* clock) {
        clock->cpu = 1;
        if (it.ipu == 0) {
          pushes->push_back({{Tensor::Scalar<float>(0)}, /*timed=*/false});
        } else {
          EXPECT_EQ(popped[0].virtual_time, 0);
        }
        return absl::OkStatus();
      },
      "replica 0");
  ASSERT_TRUE(s.ok()) << s;
  // IPU 1's two items cost 1 each and wait for nothing.
  EXPECT_DOUBLE_EQ(run.vclock[1], 2);
}

TEST(WorkListsTest, AWrongNumberOfPushesIsAnInternalError) {
  auto system = TwoIpus();
  WorkLists lists = Lists(*system, 1, /*producers_first=*/false);
  lists.SizeChannels();
  WorkListsRun run(nullptr, 2);
  const std::vector<int> tokens = lists.CancelChannelsWith(run.cancel);
  const absl::Status s = lists.Run(
      run,
      [&](const WorkListItem&, std::vector<ChannelMessage>&,
          std::vector<ItemPush>*, WorkItemClock*) { return absl::OkStatus(); },
      "replica 0");
  for (int t : tokens) run.cancel->Unregister(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST(WorkListsTest, TheCallingIpusListRunsInline) {
  auto system = TwoIpus();
  WorkLists lists = Lists(*system, 2, /*producers_first=*/false);
  lists.SizeChannels();
  absl::Status s = absl::UnknownError("not run");
  RunOnDevice(system->device(0), [&] {
    WorkListsRun run(nullptr, 2);
    s = lists.Run(
        run,
        [&](const WorkListItem& it, std::vector<ChannelMessage>&,
            std::vector<ItemPush>* pushes, WorkItemClock*) {
          if (it.ipu == 0) pushes->push_back({{Tensor::Scalar<float>(0)}});
          return absl::OkStatus();
        },
        "replica 0");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(WorkListsTest, MeetSyncsTheClocksThenAddsEachIpusWork) {
  WorkListsRun run(std::make_shared<CancellationManager>(), 3);
  run.vclock = {1.0, 4.0, 2.5};
  EXPECT_EQ(run.Meet(), 0.0);
  EXPECT_EQ(run.vclock, (std::vector<double>{4.0, 4.0, 4.0}));
  run.vclock[2] = 5.0;
  EXPECT_EQ(run.Meet({0.5, 2.0, 1.0}), 2.0);
  EXPECT_EQ(run.vclock, (std::vector<double>{5.5, 7.0, 6.0}));
}

}  // namespace
}  // namespace ipuflow
