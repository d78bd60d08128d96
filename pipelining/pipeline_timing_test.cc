// The virtual clocks. With modelled costs (PipelineOptions::virtual_costs)
// the runtime's timeline is exactly the dry-run planner's, item by item, so
// a balanced pipeline shows the textbook bubble and overlaps its IPUs as N
// real ones would; nothing here depends on the host's speed or load (speed
// itself is pipeline_benchmark's). With measured CPU costs: items respect
// their dependencies and never overlap on an IPU. Also: cancelling the
// system stops a run from another thread.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipelining/balanced_model.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"
#include "pipelining/planner.h"

namespace ipuflow::pipelining {
namespace {

constexpr int kBatch = 32;

struct Config {
  PipelineSchedule kind = PipelineSchedule::kGrouped;
  int stages = 4;
  int m = 8;
  int runs = 2;
  bool training = true;
  int width = 192;
  std::optional<StageCosts> costs;
};

// N stages of two dense layers each, on runs x m micro-batches; inference
// pipelines push the last stage's output to an outfeed.
struct Balanced {
  std::unique_ptr<IPUSystem> system;
  std::unique_ptr<IPUStrategy> strategy;
  Scope scope = Scope::NewRootScope();
  std::unique_ptr<feeds::IPUInfeedQueue> infeed;
  std::unique_ptr<feeds::IPUOutfeedQueue> outfeed;
  std::unique_ptr<Pipeline> pipeline;

  explicit Balanced(const Config& c, int64_t elements = 0) {
    system = testing::MakeSystem(c.stages);
    strategy = std::make_unique<IPUStrategy>(system.get());
    Tensor x = ipuflow::testing::RandomTensor({kBatch, c.width}, -1, 1, 5);
    infeed = *feeds::IPUInfeedQueue::Create(feeds::FromTensors({x})->Repeat(
        elements > 0 ? elements : int64_t{c.m} * c.runs));
    PipelineOptions o;
    for (int s = 0; s < c.stages; ++s) {
      o.computational_stages.push_back(DenseTanhStage(s, c.width, 2));
    }
    o.gradient_accumulation_count = c.m;
    o.repeat_count = c.runs;
    o.infeed_queue = infeed.get();
    o.pipeline_schedule = c.kind;
    if (c.training) {
      o.optimizer_function = MeanSquareSgd(0.01f);
    } else {
      outfeed = *feeds::IPUOutfeedQueue::Create();
      o.outfeed_queue = outfeed.get();
    }
    o.virtual_costs = c.costs;
    pipeline = std::move(Pipeline::Create(scope, o)).value();
    EXPECT_TRUE(strategy->Initialize(*scope.graph()).ok());
  }
};

using WorkKey = std::tuple<int, int, int>;  // stage, pass, micro-batch.
WorkKey KeyOf(const TimedItem& it) {
  return {it.stage, static_cast<int>(it.pass), it.micro_batch};
}

TEST(VirtualClockTest, ItemsFollowDependenciesAndNeverOverlapOnAnIpu) {
  // Measured CPU costs: any values, so only the order is checked.
  for (PipelineSchedule kind :
       {PipelineSchedule::kGrouped, PipelineSchedule::kInterleaved,
        PipelineSchedule::kSequential}) {
    Config c;
    c.kind = kind;
    Balanced b(c);
    auto r = testing::RunPipeline(*b.strategy, *b.pipeline);
    ASSERT_TRUE(r.ok()) << r.status();
    std::map<WorkKey, TimedItem> by_work;
    std::map<int, std::vector<TimedItem>> by_ipu;
    for (const TimedItem& it : r->items) {
      by_work[KeyOf(it)] = it;
      by_ipu[it.ipu].push_back(it);
      EXPECT_GE(it.end, it.start);
    }
    ASSERT_EQ(by_work.size(), 2u * 4 * 16);
    const double eps = 1e-12;
    auto end_of = [&](int s, int pass, int m) {
      return by_work[std::make_tuple(s, pass, m)].end;
    };
    for (const auto& [key, it] : by_work) {
      const auto [s, pass, m] = key;
      if (pass == 0 && s > 0) {
        EXPECT_GE(it.start + eps, end_of(s - 1, 0, m));
      }
      if (pass == 1) {
        EXPECT_GE(it.start + eps, end_of(s, 0, m));
        if (s < 3) {
          EXPECT_GE(it.start + eps, end_of(s + 1, 1, m));
        }
      }
    }
    for (auto& [ipu, items] : by_ipu) {
      std::sort(items.begin(), items.end(),
                [](const TimedItem& a, const TimedItem& b) {
                  return a.start < b.start;
                });
      for (size_t i = 1; i < items.size(); ++i) {
        EXPECT_GE(items[i].start + eps, items[i - 1].end) << "IPU " << ipu;
      }
    }
    // Sequential: one item at a time across all IPUs.
    if (kind == PipelineSchedule::kSequential) {
      std::vector<TimedItem> all = r->items;
      std::sort(all.begin(), all.end(),
                [](const auto& a, const auto& b) { return a.start < b.start; });
      for (size_t i = 1; i < all.size(); ++i) {
        EXPECT_GE(all[i].start + eps, all[i - 1].end);
      }
    }
    // The report's plan is the planner's on the measured mean costs.
    auto plan = PlanSchedule(r->table, r->stage_costs);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(r->planned_bubble, plan->bubble);
    EXPECT_EQ(r->planned_seconds_per_run, plan->makespan);
    for (int s = 0; s < 4; ++s) {
      EXPECT_GT(r->stage_costs.forward[s], 0);
      EXPECT_GT(r->stage_costs.backward[s], 0);
    }
  }
}

// Every item of every run where the planner puts it (run r shifted by r
// makespans: runs do not overlap), and the report's figures the plan's.
void ExpectPlannersTimeline(const Config& c) {
  SCOPED_TRACE(::testing::Message()
               << PipelineScheduleName(c.kind) << " N=" << c.stages
               << " M=" << c.m << (c.training ? " training" : " inference"));
  Balanced b(c);
  auto r = testing::RunPipeline(*b.strategy, *b.pipeline);
  ASSERT_TRUE(r.ok()) << r.status();
  auto plan = PlanSchedule(r->table, *c.costs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<WorkKey, TimedItem> planned;
  for (const TimedItem& it : plan->items) planned[KeyOf(it)] = it;
  ASSERT_EQ(r->items.size(), plan->items.size() * c.runs);
  // Costs are small integers, so every time is exact: no tolerance.
  for (const TimedItem& it : r->items) {
    const int run = it.micro_batch / c.m;
    TimedItem want =
        planned.at({it.stage, static_cast<int>(it.pass), it.micro_batch % c.m});
    const double shift = run * plan->makespan;
    EXPECT_EQ(it.ipu, want.ipu);
    EXPECT_EQ(it.start, want.start + shift)
        << "stage " << it.stage << " pass " << static_cast<int>(it.pass)
        << " micro-batch " << it.micro_batch;
    EXPECT_EQ(it.end, want.end + shift);
  }
  EXPECT_EQ(r->stage_costs.forward, c.costs->forward);
  if (c.training) {
    EXPECT_EQ(r->stage_costs.backward, c.costs->backward);
  }
  EXPECT_EQ(r->measured_seconds_per_run, plan->makespan);
  EXPECT_EQ(r->virtual_seconds, c.runs * plan->makespan);
  EXPECT_EQ(r->weight_update_seconds, 0);
  EXPECT_DOUBLE_EQ(r->bubble, plan->bubble);
  EXPECT_DOUBLE_EQ(r->planned_bubble, plan->bubble);
  for (int k = 0; k < c.stages; ++k) {
    EXPECT_EQ(r->ipu_busy_seconds[k], c.runs * plan->ipu_busy[k]);
  }
}

TEST(VirtualClockTest, ModelledCostsGiveThePlannersTimelineExactly) {
  for (PipelineSchedule kind :
       {PipelineSchedule::kGrouped, PipelineSchedule::kInterleaved,
        PipelineSchedule::kSequential}) {
    for (bool training : {true, false}) {
      Config c;
      c.kind = kind;
      c.training = training;
      c.width = 8;  // The work is not what is timed.
      // Unbalanced: the slowest stage sets the pace, not a formula.
      c.costs = StageCosts{{1, 3, 2, 1}, {2, 5, 4, 2}};
      ExpectPlannersTimeline(c);
    }
  }
}

TEST(VirtualClockTest, BalancedStagesGiveTheTextbookBubble) {
  // TensorFlow IPU guide 6.7.2: the ramp-up and ramp-down of N stages cost
  // N-1 of M+N-1 units per IPU, (N-1)/(M+N-1); Sequential uses one IPU of
  // N at a time, (N-1)/N.
  for (PipelineSchedule kind :
       {PipelineSchedule::kGrouped, PipelineSchedule::kInterleaved,
        PipelineSchedule::kSequential}) {
    Config c;
    c.kind = kind;
    c.m = 16;
    c.width = 8;
    c.costs = StageCosts::Uniform(4, 1, 2);
    Balanced b(c);
    auto r = testing::RunPipeline(*b.strategy, *b.pipeline);
    ASSERT_TRUE(r.ok()) << r.status();
    const double theory = kind == PipelineSchedule::kSequential
                              ? 3.0 / 4
                              : TheoreticalBubble(4, 16);
    EXPECT_DOUBLE_EQ(r->theoretical_bubble, theory);
    EXPECT_DOUBLE_EQ(r->bubble, theory) << PipelineScheduleName(kind);
    // Four IPUs' work in a span of (1 - bubble) x 4 of it: the timeline
    // overlaps them whatever the host's core count (3.37 for Grouped).
    double busy = 0;
    for (double s : r->ipu_busy_seconds) busy += s;
    EXPECT_DOUBLE_EQ(busy / (r->measured_seconds_per_run * r->repeats),
                     4 * (1 - theory));
    // Grouped: one micro-batch per unit of F + B after the ramp-up.
    if (kind == PipelineSchedule::kGrouped) {
      EXPECT_EQ(r->measured_seconds_per_run, (16 + 3) * 3.0);
    }
  }
}

TEST(VirtualClockTest, TwoStagesPerIpuShareItsClock) {
  // Inference, stages 0,1,0,1 on two IPUs: an IPU runs one item at a time,
  // so the planner's shared-IPU timeline holds too.
  const StageCosts costs{{1, 2, 3, 1}, {}};
  auto system = testing::MakeSystem(2);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(
      feeds::FromTensors(
          {ipuflow::testing::RandomTensor({kBatch, 8}, -1, 1, 5)})
          ->Repeat(16));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  for (int s = 0; s < 4; ++s) {
    o.computational_stages.push_back(DenseTanhStage(s, 8, 2));
  }
  o.device_mapping = {0, 1, 0, 1};
  o.gradient_accumulation_count = 8;
  o.repeat_count = 2;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.virtual_costs = costs;
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto r = testing::RunPipeline(strategy, **pipeline);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 2u * 4 * 8);
  auto plan = PlanSchedule(r->table, costs);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<WorkKey, TimedItem> planned;
  for (const TimedItem& it : plan->items) planned[KeyOf(it)] = it;
  for (const TimedItem& it : r->items) {
    const TimedItem& want = planned.at({it.stage, 0, it.micro_batch % 8});
    const double shift = (it.micro_batch / 8) * plan->makespan;
    EXPECT_EQ(it.ipu, want.ipu);
    EXPECT_EQ(it.start, want.start + shift);
    EXPECT_EQ(it.end, want.end + shift);
  }
  EXPECT_DOUBLE_EQ(r->bubble, plan->bubble);
}

TEST(VirtualClockTest, VirtualCostsAreValidated) {
  for (StageCosts bad :
       {StageCosts{{1, 1, 1}, {1, 1, 1, 1}}, StageCosts{{1, 1, 1, 1}, {}},
        StageCosts{{1, -1, 1, 1}, {1, 1, 1, 1}}}) {
    Scope scope = Scope::NewRootScope();
    auto infeed = *feeds::IPUInfeedQueue::Create(feeds::FromTensors(
        {ipuflow::testing::RandomTensor({kBatch, 8}, -1, 1, 5)}));
    PipelineOptions o;
    for (int s = 0; s < 4; ++s) {
      o.computational_stages.push_back(DenseTanhStage(s, 8, 2));
    }
    o.gradient_accumulation_count = 8;
    o.infeed_queue = infeed.get();
    o.optimizer_function = MeanSquareSgd(0.01f);
    o.virtual_costs = bad;
    auto p = Pipeline::Create(scope, o);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()),
                ::testing::HasSubstr("virtual_costs needs one finite cost"));
  }
}

TEST(CancellationTest, CancellingTheSystemStopsARunFromAnotherThread) {
  // Enough work for minutes; cancelled once the first items ran. The
  // verdict is the status and a count, not a time.
  Config c;
  c.m = 16;
  c.runs = 1000;
  Balanced b(c, 16000);
  std::thread canceller([&] {
    while (b.system->device(3).counters().ipu_to_ipu.load() == 0 &&
           b.infeed->elements_produced() < 40) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    b.system->cancellation()->StartCancel(absl::CancelledError("stop"));
  });
  auto r = testing::RunPipeline(*b.strategy, *b.pipeline);
  canceller.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(b.infeed->elements_produced(), 16000);
}

}  // namespace
}  // namespace ipuflow::pipelining
