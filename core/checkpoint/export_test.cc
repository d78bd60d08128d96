// A step executable (one weight update per Execute, host feeds): save after
// 3 steps, restore in a fresh IPU system, continue 2: bitwise the weights
// and losses of 5 uninterrupted steps. Then the trained model exported as
// GraphDef plus weights and loaded into a host Session, as another program
// would, computing what the IPU computes.
#include "core/checkpoint/export.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/training_state.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/math/sub.h"
#include "ops/state/random.h"
#include "ops/state/variable.h"
#include "optimizers/momentum.h"

namespace ipuflow::checkpoint {
namespace {

using ::ipuflow::testing::EmptyTestDir;

using ::testing::HasSubstr;

Tensor X(int step) {
  std::vector<float> v(6);
  for (int i = 0; i < 6; ++i) v[i] = 0.1f * ((step * 7 + i * 3) % 11) - 0.5f;
  return Tensor::FromVector(v, {2, 3});
}
Tensor Y(int step) {
  return Tensor::FromVector<float>({0.3f * step - 1, 0.25f}, {2});
}

struct StepModel {
  StepModel() : opt(0.05f, 0.9f) {
    IPUConfig config;
    config.set_auto_select_ipus(1);
    config.set_seed(3);
    system = std::move(IPUSystem::Create(config)).value();
    scope = std::make_unique<Scope>(Scope::NewRootScope());
    const Scope& s = *scope;
    graph = s.graph();
    x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {2, 3});
    y = ops::Placeholder(s.WithOpName("y"), DType::kFloat32, {2});
    auto w = ops::Variable(s.WithOpName("w"),
                           ops::RandomNormal(s, {3, 1}, 0, 0.5f, 21));
    pred =
        ops::ReduceSum(s.WithOpName("pred"), ops::MatMul(s, x, w.value), {1});
    loss = ops::ReduceMean(s, ops::Square(s, ops::Sub(s, pred, y)));
    train = opt.Minimize(s, loss);
    EXPECT_TRUE(s.ok()) << s.status();
    strategy = std::make_unique<IPUStrategy>(system.get());
    EXPECT_TRUE(strategy->Initialize(*graph).ok());
    exe = std::move(strategy->Compile(*graph, {loss}, {train},
                                      {{x, X(0)}, {y, Y(0)}}))
              .value();
  }
  ~StepModel() { strategy.reset(); }

  void Train(int from, int to) {
    for (int i = from; i < to; ++i) {
      std::vector<std::vector<Tensor>> out;
      ASSERT_TRUE(exe->Execute({{X(i), Y(i)}}, &out).ok());
      losses.push_back(out[0][0].scalar<float>());
    }
  }

  optimizers::MomentumOptimizer opt;
  std::unique_ptr<IPUSystem> system;
  std::unique_ptr<Scope> scope;  // Owns the graph.
  Graph* graph;
  Output x, y, pred, loss;
  Node* train;
  std::unique_ptr<IPUStrategy> strategy;
  DeviceProgram* exe;
  std::vector<float> losses;
};

TEST(StepExecutableTest, SaveRestoreIsBitwise) {
  StepModel whole;
  whole.Train(0, 5);
  const std::string dir = EmptyTestDir("step");
  std::string path;
  std::vector<float> losses;
  {
    StepModel first;
    first.Train(0, 3);
    TrainingCheckpoint ckpt(first.graph, first.exe);
    path = *ckpt.Save(dir, 3);
    losses = first.losses;
  }
  auto c = ReadCheckpointFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  StepModel second;
  TrainingCheckpoint ckpt(second.graph, second.exe);
  ASSERT_TRUE(ckpt.Restore(*c).ok());
  second.Train(3, 5);
  losses.insert(losses.end(), second.losses.begin(), second.losses.end());
  ASSERT_EQ(losses.size(), 5u);
  EXPECT_EQ(std::memcmp(losses.data(), whole.losses.data(), 5 * sizeof(float)),
            0);
  auto a = *whole.exe->ReadVariables(".*");
  auto b = *second.exe->ReadVariables(".*");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 2u);  // w and its momentum slot.
  for (const auto& [name, per] : a) {
    EXPECT_EQ(std::memcmp(per[0].raw_data(), b.at(name)[0].raw_data(),
                          per[0].TotalBytes()),
              0)
        << name;
  }
}

TEST(ExportTest, AnotherProgramLoadsTheTrainedModel) {
  StepModel trained;
  trained.Train(0, 4);
  const std::string path = EmptyTestDir("export") + "/model.ipuckpt";
  ASSERT_TRUE(ExportModel(*trained.graph, *trained.exe, path).ok());
  // What the IPU computes for a new input.
  const Tensor x = X(9);
  auto ipu = trained.strategy->Run(*trained.graph, {trained.pred}, {},
                                   {{trained.x, x}});
  ASSERT_TRUE(ipu.ok()) << ipu.status();

  absl::StatusOr<LoadedModel> m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  Output px(m->graph->FindNode("x"), 0);
  Output pred(m->graph->FindNode("pred"), 0);
  std::vector<Tensor> out;
  ASSERT_TRUE(m->session->Run({{px, x}}, {pred}, &out).ok());
  ASSERT_EQ(out[0].NumElements(), 2);
  EXPECT_EQ(std::memcmp(out[0].raw_data(), (*ipu)[0].raw_data(), 8), 0)
      << out[0].DebugString() << " vs " << (*ipu)[0].DebugString();
  // A training checkpoint is not an export.
  TrainingCheckpoint ckpt(trained.graph, trained.exe);
  const std::string dir = EmptyTestDir("export_ckpt");
  auto saved = ckpt.Save(dir, 4);
  ASSERT_TRUE(saved.ok());
  EXPECT_THAT(LoadModel(*saved).status().message(), HasSubstr("no graph"));
}

}  // namespace
}  // namespace ipuflow::checkpoint
