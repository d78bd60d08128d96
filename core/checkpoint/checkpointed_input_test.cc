// How a training checkpoint finds its inputs (checkpointed_input.h): the
// infeeds its program reads, by name, each with the DataLoader behind it
// found through the datasets that keep its elements in order; nothing
// registered by hand. And the dependency rule that made this necessary:
// core/ depends on nothing above it.
#include "core/checkpoint/checkpointed_input.h"

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_test_model.h"
#include "core/checkpoint/manifest_reading.h"
#include "core/checkpoint/training_state.h"
#include "core/ipu/ipu_strategy.h"
#include "core/status.h"
#include "core/testing/test_system.h"
#include "feeds/data_loader.h"
#include "feeds/dataset.h"
#include "feeds/infeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CheckpointedInputTest, TheProgramsInfeedIsFoundWithItsDataLoader) {
  testing::TrainingRun run(testing::RunConfig{}, nullptr);
  ASSERT_TRUE(run.status().ok()) << run.status();
  EXPECT_THAT(run.ckpt().input_names(), ElementsAre("train"));
  ASSERT_TRUE(run.Train(1).ok());
  absl::StatusOr<CheckpointContents> c = run.ckpt().Capture(1);
  ASSERT_TRUE(c.ok()) << c.status();
  // One weight update: 2 replicas x 2 accumulated micro-batches.
  const InfeedPosition* p = FindInfeed(c->manifest, "train");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->consumed(), ElementsAre(2, 2));
  const DataLoaderPosition* l = FindLoader(c->manifest, "train");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->epoch(), 0);
  EXPECT_EQ(l->sample(), 4 * testing::kBatch);
}

// A program that reads `a` and `b` and adds their elements to a variable,
// compiled on a 1-IPU system; `unused` is in the same graph but not in the
// program.
struct TwoInfeeds {
  std::unique_ptr<IPUSystem> system = ::ipuflow::testing::MakeSystem(1);
  Scope root = Scope::NewRootScope();
  std::unique_ptr<IPUStrategy> strategy;
  DeviceProgram* exe = nullptr;

  absl::Status Build(feeds::IPUInfeedQueue* a, feeds::IPUInfeedQueue* b,
                     feeds::IPUInfeedQueue* unused) {
    ASSIGN_OR_RETURN(std::vector<Output> xa, a->BuildDequeue(root));
    ASSIGN_OR_RETURN(std::vector<Output> xb, b->BuildDequeue(root));
    RETURN_IF_ERROR(unused->BuildDequeue(root).status());
    ops::VariableHandle total =
        ops::Variable(root.WithOpName("total"), ops::Const(root, 0.0f));
    Output sum = ops::Add(root, xa[0], xb[0]);
    Node* add = ops::AssignAdd(root, total.handle,
                               ops::Cast(root, sum, DType::kFloat32));
    strategy = std::make_unique<IPUStrategy>(system.get());
    ASSIGN_OR_RETURN(exe, strategy->Compile(*root.graph(), {sum}, {add}));
    return strategy->Initialize(*root.graph());
  }
};

std::unique_ptr<feeds::IPUInfeedQueue> Infeed(const std::string& name) {
  auto q = feeds::IPUInfeedQueue::Create(feeds::Range(0, 10),
                                         feeds::InfeedOptions{name});
  IPU_CHECK_OK(q.status());
  return *std::move(q);
}

TEST(CheckpointedInputTest, OnlyTheProgramsInfeedsAreSavedEachByName) {
  auto a = Infeed("a"), b = Infeed("b"), eval = Infeed("eval");
  TwoInfeeds t;
  ASSERT_TRUE(t.Build(a.get(), b.get(), eval.get()).ok());
  std::vector<std::vector<Tensor>> sums;
  ASSERT_TRUE(t.exe->Execute({{}}, &sums).ok());
  EXPECT_EQ(sums[0][0].data<int64_t>()[0], 0);  // Element 0 of each.
  TrainingCheckpoint ckpt(t.root.graph(), t.exe);
  EXPECT_THAT(ckpt.input_names(), ElementsAre("a", "b"));
  absl::StatusOr<CheckpointContents> c = ckpt.Capture(0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(InfeedNames(c->manifest), "a, b");
  EXPECT_THAT(c->manifest.infeeds(0).consumed(), ElementsAre(1));
  EXPECT_EQ(c->manifest.loaders_size(), 0);  // No DataLoader behind them.
}

TEST(CheckpointedInputTest, InfeedsSharingANameAreRefused) {
  auto a = Infeed("infeed"), b = Infeed("infeed"), eval = Infeed("eval");
  TwoInfeeds t;
  ASSERT_TRUE(t.Build(a.get(), b.get(), eval.get()).ok());
  TrainingCheckpoint ckpt(t.root.graph(), t.exe);
  absl::Status s = ckpt.Capture(0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("two inputs of the program are called 'infeed'"));
  // A checkpoint of the same program with its infeeds named apart passes
  // every other check, then meets the same refusal.
  auto a2 = Infeed("a"), b2 = Infeed("b"), eval2 = Infeed("eval");
  TwoInfeeds apart;
  ASSERT_TRUE(apart.Build(a2.get(), b2.get(), eval2.get()).ok());
  absl::StatusOr<CheckpointContents> c =
      TrainingCheckpoint(apart.root.graph(), apart.exe).Capture(0);
  ASSERT_TRUE(c.ok()) << c.status();
  s = ckpt.Restore(*c);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("restore: two inputs of the program are called "
                        "'infeed'"));
}

TEST(CheckpointedInputTest, ADestroyedInfeedFailsTheSave) {
  auto a = Infeed("a"), b = Infeed("b"), eval = Infeed("eval");
  TwoInfeeds t;
  ASSERT_TRUE(t.Build(a.get(), b.get(), eval.get()).ok());
  TrainingCheckpoint ckpt(t.root.graph(), t.exe);
  b.reset();
  absl::Status s = ckpt.Capture(0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("input 'b' was destroyed"));
}

TEST(CheckpointedInputTest, AnEmptyNameIsRefused) {
  auto q = feeds::IPUInfeedQueue::Create(feeds::Range(0, 10),
                                         feeds::InfeedOptions{""});
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(q.status().message(), HasSubstr("options.name is empty"));
  EXPECT_EQ((*feeds::IPUInfeedQueue::Create(feeds::Range(0, 1)))->name(),
            "infeed");
}

// The loader is found through what keeps its micro-batches one for one and
// in order, and not through what drops, reorders or groups them (the
// infeed's count would then not be the loader's).
TEST(CheckpointedInputTest, TheDataLoaderIsFoundThroughOrderedDatasetsOnly) {
  feeds::DataLoaderOptions o;
  o.batch_size = testing::kBatch;
  auto loader = feeds::DataLoader::Create(testing::Samples(48), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::StatusOr<feeds::DatasetPtr> micro = (*loader)->ToInfeedDataset();
  ASSERT_TRUE(micro.ok());
  const feeds::DatasetPtr& m = *micro;
  for (const feeds::DatasetPtr& d :
       {m, m->Repeat(), m->Take(5)->Prefetch(2),
        m->Map([](feeds::Element e) { return e; }, 1, m->spec())}) {
    std::shared_ptr<const feeds::DataLoader> behind =
        feeds::DataLoader::Behind(*d);
    ASSERT_NE(behind, nullptr) << d->DebugString();
    EXPECT_EQ(behind->combined_batch_size(), (*loader)->combined_batch_size());
    EXPECT_EQ(behind->plan_key().seed, (*loader)->plan_key().seed);
  }
  for (const feeds::DatasetPtr& d : {m->Skip(1), m->Shuffle(4), m->Batch(2),
                                     m->Shard(2, 0), testing::Samples(4)}) {
    EXPECT_EQ(feeds::DataLoader::Behind(*d), nullptr) << d->DebugString();
  }
}

// docs/ARCHITECTURE.md, "The layers": core/ depends on nothing above it.
// core/BUILD.bazel's genquery lists what core's libraries reach in ops/,
// feeds/, optimizers/, pipelining/ or examples/: nothing.
TEST(LayeringTest, CoreDependsOnNothingAboveIt) {
  std::ifstream in("core/core_upward_deps");
  ASSERT_TRUE(in.good()) << "core/core_upward_deps (genquery) is missing";
  std::string line, found;
  while (std::getline(in, line)) {
    if (!line.empty()) found += line + "\n";
  }
  EXPECT_EQ(found, "") << "core/ libraries depend on these targets above "
                          "core/:\n"
                       << found;
}

}  // namespace
}  // namespace ipuflow::checkpoint
