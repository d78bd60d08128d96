// Stress (issue 9, section 3): a kernel error injected at random steps.
// Infeed elements are (id, index); a Gather with index 99 out of range
// [0, 10) fails on the elements picked at random (about one run in two).
// The same infeed, outfeed and program run again and again; every run:
//  - fails with InvalidArgument naming the Gather node (and, in a pipeline,
//    the micro-batch), or succeeds;
//  - leaves in the outfeed exactly the steps before the failing one: ids
//    consecutive from where the run started, none of them a bad element;
//    the failing element is the next id;
//  - is followed by a run that works: its ids continue the stream with the
//    element after the failing one (a pipeline gives back to the infeed
//    what its feeder took ahead of the failure).
// IPUFLOW_STRESS_RUNS shortens a run.
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/array/identity.h"
#include "ops/control/loops.h"
#include "pipelining/pipeline.h"
#include "tests/stress/proc_status.h"

namespace ipuflow::stress {
namespace {

using ::testing::HasSubstr;

constexpr int kStepsPerRun = 20;

std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  return std::move(IPUSystem::Create(config)).value();
}

// Elements (id, index): index 99 (out of range) for ids in `bad`.
feeds::DatasetPtr Elements(std::shared_ptr<const std::set<int64_t>> bad) {
  return feeds::Range(0, int64_t{1} << 40)
      ->Map(
          [bad](feeds::Element e) -> absl::StatusOr<feeds::Element> {
            const int64_t id = e[0].scalar<int64_t>();
            return feeds::Element{
                e[0], Tensor::Scalar<int32_t>(bad->count(id) ? 99 : id % 10)};
          },
          1,
          feeds::ElementSpec{{DType::kInt64, DType::kInt32},
                             {TensorShape(), TensorShape()}});
}

std::shared_ptr<std::set<int64_t>> BadIds(std::mt19937& rng, int64_t n) {
  auto bad = std::make_shared<std::set<int64_t>>();
  for (int64_t id = 0; id < n; ++id) {
    if (rng() % (2 * kStepsPerRun) == 0) bad->insert(id);
  }
  return bad;
}

struct Figures {
  int runs = 0, failed = 0, ok_after_failure = 0;
  int64_t steps = 0;
};

// Checks one run's outfeed ids and status against the bad set; `next` is
// the id the stream should continue with (updated).
void CheckRun(const absl::Status& st, const std::vector<int64_t>& ids,
              const std::set<int64_t>& bad, bool pipeline, int64_t* next,
              bool* last_failed, Figures* f, int run) {
  SCOPED_TRACE(absl::StrCat("run ", run, ": ", st.ToString()));
  ++f->runs;
  f->steps += static_cast<int64_t>(ids.size());
  if (!ids.empty()) {
    EXPECT_EQ(ids[0], *next) << "the stream did not continue";
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i], ids[0] + static_cast<int64_t>(i))
        << "step " << i << ": lost, duplicated or reordered";
    EXPECT_EQ(bad.count(ids[i]), 0u) << "a bad element reached the outfeed";
  }
  const int64_t after = ids.empty() ? *next : ids.back() + 1;
  if (st.ok()) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(kStepsPerRun));
    if (*last_failed) ++f->ok_after_failure;
    *next = after;
    *last_failed = false;
    return;
  }
  ++f->failed;
  *last_failed = true;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("Gather"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("99"));
  if (pipeline) {
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(absl::StrCat("micro-batch ", ids.size() % 4)));
  }
  EXPECT_EQ(bad.count(after), 1u) << "the step after the outfeed's last ("
                                  << after << ") is not a bad element";
  *next = after + 1;
}

std::vector<int64_t> TakeIds(feeds::IPUOutfeedQueue* outfeed,
                             const std::string& name) {
  std::vector<int64_t> ids;
  for (const feeds::OutfeedElement& step : outfeed->TakeAvailable()) {
    ids.push_back(step[name].data<int64_t>()[0]);
  }
  return ids;
}

void Print(const char* what, const Figures& f) {
  std::printf(
      "%s: %d runs, %d failed at a random step, %d runs after a "
      "failure worked, %lld outfeed steps checked, none lost\n",
      what, f.runs, f.failed, f.ok_after_failure,
      static_cast<long long>(f.steps));
}

TEST(KernelErrorStressTest, LoopErrorAtRandomStepsKeepsTheStream) {
  const int runs = static_cast<int>(EnvInt("IPUFLOW_STRESS_RUNS", 500));
  std::mt19937 rng(7);
  auto bad = BadIds(rng, int64_t{runs} * kStepsPerRun + 1);
  auto system = MakeSystem(1);
  auto infeed =
      std::move(feeds::IPUInfeedQueue::Create(Elements(bad), 3)).value();
  auto outfeed = std::move(feeds::IPUOutfeedQueue::Create()).value();
  Scope s = Scope::NewRootScope();
  Tensor table = Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto loop = loops::Repeat(
      s, kStepsPerRun,
      [&](const Scope& b, const std::vector<Output>& a) {
        Output g =
            ops::Gather(b.WithOpName("inject"), ops::Const(b, table), a[1]);
        outfeed->Enqueue(b, {{"id", ops::Identity(b, a[0])}, {"g", g}});
        return std::vector<Output>{};
      },
      {}, infeed.get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  IPUStrategy strategy(system.get());
  int64_t next = 0;
  bool last_failed = false;
  Figures f;
  for (int r = 0; r < runs && !HasFailure(); ++r) {
    absl::Status st = strategy.Run(*s.graph(), {}, {loop->op}).status();
    CheckRun(st, TakeIds(outfeed.get(), "id"), *bad, false, &next, &last_failed,
             &f, r);
  }
  Print("device loop", f);
  EXPECT_GT(f.failed, runs / 4);
  EXPECT_GT(f.ok_after_failure, runs / 8);
}

TEST(KernelErrorStressTest, PipelineErrorAtRandomMicroBatches) {
  const int runs = static_cast<int>(EnvInt("IPUFLOW_STRESS_RUNS", 500));
  std::mt19937 rng(8);
  auto bad = BadIds(rng, int64_t{runs} * kStepsPerRun + 1);
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  auto infeed =
      std::move(feeds::IPUInfeedQueue::Create(Elements(bad), 3)).value();
  auto outfeed = std::move(feeds::IPUOutfeedQueue::Create()).value();
  Scope s = Scope::NewRootScope();
  Tensor table = Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  pipelining::PipelineOptions o;
  o.computational_stages = {
      [](const Scope& sc, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(sc, a[0]),
                                   ops::Identity(sc, a[1])};
      },
      // The last stage fails: micro-batches finish it in order, so the
      // outfeed holds exactly those before the failing one.
      [table](const Scope& sc, const std::vector<Output>& a) {
        return std::vector<Output>{
            ops::Identity(sc, a[0]),
            ops::Gather(sc.WithOpName("inject"), ops::Const(sc, table), a[1])};
      }};
  o.gradient_accumulation_count = 4;
  o.repeat_count = kStepsPerRun / 4;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = pipelining::Pipeline::Create(s, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  int64_t next = 0;
  bool last_failed = false;
  Figures f;
  for (int r = 0; r < runs && !HasFailure(); ++r) {
    absl::Status st =
        strategy.Run(*s.graph(), {}, {(*pipeline)->frame()}).status();
    CheckRun(st, TakeIds(outfeed.get(), "0"), *bad, true, &next, &last_failed,
             &f, r);
  }
  Print("pipeline", f);
  EXPECT_GT(f.failed, runs / 4);
  EXPECT_GT(f.ok_after_failure, runs / 8);
}

}  // namespace
}  // namespace ipuflow::stress
