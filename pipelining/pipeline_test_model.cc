#include "pipelining/pipeline_test_model.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/session.h"
#include "core/tensor_eigen.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/nn/relu.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/nn/tanh.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow::pipelining::testing {
namespace {

Output Var(const Scope& scope, const std::string& name,
           const std::map<std::string, Tensor>& init) {
  ops::VariableHandle v =
      ops::Variable(scope.WithOpName(name), ops::Const(scope, init.at(name)));
  return ops::ReadVariable(scope, v.handle);
}

}  // namespace

std::vector<Output> ModelStage(int s, const Scope& scope,
                               const std::vector<Output>& args,
                               const std::map<std::string, Tensor>& init) {
  const std::string w = absl::StrCat("w", s), b = absl::StrCat("b", s);
  Output h = ops::MatMul(scope, args[0], Var(scope, w, init));
  if (s != 2) h = ops::Add(scope, h, Var(scope, b, init));
  if (s == 0 || s == 2) h = ops::Tanh(scope, h);
  if (s == 1) h = ops::Relu(scope, h);
  return {h, args[1]};
}

std::vector<ComputationalStage> ModelStages(
    const std::map<std::string, Tensor>& init) {
  std::vector<ComputationalStage> stages;
  for (int s = 0; s < 4; ++s) {
    stages.push_back(StageFunction(
        [s, &init](const Scope& sc, const std::vector<Output>& args) {
          return ModelStage(s, sc, args, init);
        },
        /*num_inputs=*/2));
  }
  return stages;
}

OptimizerFunction SgdCrossEntropy(float learning_rate) {
  return [learning_rate](const Scope& s, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::GradientDescentOptimizer>(learning_rate),
        ops::SoftmaxCrossEntropyLoss(s, out[0], out[1])};
  };
}

std::map<std::string, Tensor> InitialValues(uint64_t seed) {
  const int hidden = 8;
  const int in[4] = {kFeatures, hidden, hidden, hidden};
  const int out[4] = {hidden, hidden, hidden, kClasses};
  std::map<std::string, Tensor> init;
  for (int s = 0; s < 4; ++s) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(in[s]));
    init[absl::StrCat("w", s)] =
        ipuflow::testing::RandomTensor({in[s], out[s]}, -2 * scale, 2 * scale,
                                       static_cast<uint32_t>(seed + s));
    if (s != 2) {
      init[absl::StrCat("b", s)] = ipuflow::testing::RandomTensor(
          {out[s]}, -0.1f, 0.1f, static_cast<uint32_t>(seed + 10 + s));
    }
  }
  return init;
}

namespace {

constexpr uint64_t kDataSeed = 7;

std::pair<Tensor, Tensor> Data(int n, uint64_t seed) {
  Tensor x = ipuflow::testing::RandomTensor({n * kBatch, kFeatures}, -1, 1,
                                            static_cast<uint32_t>(seed));
  Tensor labels(DType::kInt32, {n * kBatch});
  for (int i = 0; i < n * kBatch; ++i) {
    labels.data<int32_t>()[i] = static_cast<int32_t>((i * 7 + seed) % kClasses);
  }
  return {x, labels};
}

}  // namespace

feeds::DatasetPtr MicroBatches(int n) {
  auto [x, labels] = Data(n, kDataSeed);
  return feeds::FromTensorSlices({x, labels})->Batch(kBatch, true);
}

std::map<std::string, Tensor> TrainReference(
    const std::map<std::string, Tensor>& init, int micro_batches, int runs,
    bool mean, const OptimizerFactory& make_optimizer) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DType::kFloat32, {kBatch, kFeatures});
  Output labels = ops::Placeholder(s, DType::kInt32, {kBatch});
  std::vector<Output> h = {x, labels};
  for (int st = 0; st < 4; ++st) h = ModelStage(st, s, h, init);
  Output loss = ops::SoftmaxCrossEntropyLoss(s, h[0], h[1]);
  std::shared_ptr<optimizers::Optimizer> opt = make_optimizer();
  std::vector<optimizers::GradAndVar> gv = opt->ComputeGradients(s, loss);
  std::vector<Output> grads;
  std::vector<optimizers::GradAndVar> fed;
  for (const auto& g : gv) {
    grads.push_back(g.grad);
    fed.push_back(
        {ops::Placeholder(s, g.grad.dtype(), g.grad.shape()), g.variable});
  }
  Node* apply = opt->ApplyGradients(s, fed);
  EXPECT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  auto [xs, ls] = Data(micro_batches * runs, kDataSeed);
  for (int r = 0; r < runs; ++r) {
    std::vector<Tensor> sum;
    for (int m = 0; m < micro_batches; ++m) {
      const int64_t row =
          (static_cast<int64_t>(r) * micro_batches + m) * kBatch;
      std::vector<Tensor> out;
      absl::Status st = session.Run({{x, xs.Slice(row, row + kBatch)},
                                     {labels, ls.Slice(row, row + kBatch)}},
                                    grads, &out);
      EXPECT_TRUE(st.ok()) << st;
      if (sum.empty()) {
        for (const Tensor& t : out) sum.push_back(t.Copy());
      } else {
        for (size_t i = 0; i < out.size(); ++i) {
          sum[i].flat<float>() += out[i].flat<float>();
        }
      }
    }
    FeedList feeds;
    for (size_t i = 0; i < sum.size(); ++i) {
      if (mean) sum[i].flat<float>() /= static_cast<float>(micro_batches);
      feeds.push_back({fed[i].grad, sum[i]});
    }
    std::vector<Tensor> none;
    absl::Status st = session.Run(feeds, {}, {apply}, &none);
    EXPECT_TRUE(st.ok()) << st;
  }
  std::map<std::string, Tensor> values;
  for (const auto& [name, t] : init) {
    values[name] = *session.resources()->FindVariable(name)->Read();
  }
  return values;
}

std::map<std::string, Tensor> ReadPipelineVariables(IPUSystem* system,
                                                    int num_ipus) {
  std::map<std::string, Tensor> values;
  for (int k = 0; k < num_ipus; ++k) {
    for (const auto& v : system->device(k).resources()->variables()) {
      if (absl::StrContains(v->name(), "accumulators")) continue;
      std::vector<std::string> parts = absl::StrSplit(v->name(), '/');
      const std::string& last = parts.back();
      if (parts.size() < 2 ||
          !absl::StartsWith(parts[parts.size() - 2], "stage") ||
          last.size() != 2 || (last[0] != 'w' && last[0] != 'b')) {
        continue;
      }
      values[last] = *v->Read();
    }
  }
  return values;
}

std::unique_ptr<IPUSystem> MakeSystem(int ipus, bool allow_recompute) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.set_allow_recompute(allow_recompute);
  // This model's optimizer state is tens of bytes a tensor: offload all of
  // it (the 128-byte default is tested on its own).
  config.set_minimum_remote_tensor_size(4);
  return std::move(IPUSystem::Create(config)).value();
}

float MaxDifference(const std::map<std::string, Tensor>& a,
                    const std::map<std::string, Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  float worst = 0;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      ADD_FAILURE() << "missing " << name;
      continue;
    }
    auto x = t.flat<float>();
    auto y = it->second.flat<float>();
    worst = std::max(worst, (x - y).abs().maxCoeff());
  }
  return worst;
}

absl::StatusOr<PipelineReport> RunPipeline(IPUStrategy& strategy,
                                           const Pipeline& pipeline,
                                           const FeedList& feeds) {
  ASSIGN_OR_RETURN(DeviceProgram * exe,
                   strategy.Compile(*pipeline.frame()->graph(), {},
                                    {pipeline.frame()}, feeds));
  std::vector<Tensor> values;
  for (const auto& [out, value] : feeds) values.push_back(value);
  std::vector<std::vector<Tensor>> results;
  RETURN_IF_ERROR(exe->Execute({values}, &results));
  std::optional<PipelineReport> report = pipeline.last_report();
  if (!report.has_value()) {
    return absl::InternalError("the pipeline ran but has no report");
  }
  return *std::move(report);
}

}  // namespace ipuflow::pipelining::testing
