// Inference pipelines (the outfeed receives every micro-batch, in order),
// concurrent stages, accumulate_outfeed, `inputs`, and errors at run time:
// the failing stage is named and no thread is left blocked.
#include <memory>

#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "core/tensor_eigen.h"
#include "core/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/array/concat.h"
#include "ops/array/const.h"
#include "ops/array/gather.h"
#include "ops/array/identity.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/math/mul.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/nn/tanh.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "optimizers/gradient_descent.h"
#include "pipelining/pipeline.h"
#include "pipelining/pipeline_test_model.h"

namespace ipuflow::pipelining {
namespace {

using ::testing::HasSubstr;
using testing::InitialValues;
using testing::MakeSystem;
using testing::MicroBatches;
using testing::ModelStage;
using testing::ModelStages;
using testing::RunPipeline;

// The model applied on the host to micro-batch m of MicroBatches(n).
Tensor HostLogits(int n, int m) {
  auto init = InitialValues(1);
  Scope s = Scope::NewRootScope();
  auto it = MicroBatches(n)->MakeIterator();
  feeds::Element el;
  for (int i = 0; i <= m; ++i) el = *it->GetNext();
  std::vector<Output> h = {ops::Const(s, el[0]), ops::Const(s, el[1])};
  for (int st = 0; st < 4; ++st) h = ModelStage(st, s, h, init);
  Session session(s.graph());
  EXPECT_TRUE(session.Initialize().ok());
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({}, {h[0]}, &out).ok());
  return out[0];
}

class InferenceTest : public ::testing::TestWithParam<PipelineSchedule> {};

TEST_P(InferenceTest, OutfeedGetsEveryMicroBatchInOrder) {
  auto init = InitialValues(1);
  auto system = MakeSystem(4);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(12));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = 4;
  o.repeat_count = 3;
  o.pipeline_schedule = GetParam();
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto report = RunPipeline(strategy, **pipeline);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->items.size(), 4u * 12);
  auto result = outfeed->Dequeue();
  ASSERT_TRUE(result.ok());
  const Tensor& logits = (*result)["0"];
  ASSERT_EQ(logits.shape(), TensorShape({12, 4, 3}));
  for (int m : {0, 5, 11}) {
    EXPECT_TRUE(ipuflow::testing::TensorNear(
        logits.Slice(m, m + 1), *HostLogits(12, m).Reshaped({1, 4, 3}), 1e-5,
        1e-5))
        << "micro-batch " << m;
  }
  // The infeed was consumed exactly: the next run finds it empty.
  auto again = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kOutOfRange)
      << again.status();
  // Its InfeedDequeue node, in stage 0's program, says so.
  EXPECT_THAT(again.status().message(),
              HasSubstr("stage 0 (IPU 0) forward, micro-batch 0 of run 0"))
      << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("InfeedDequeue"))
      << again.status();
}

INSTANTIATE_TEST_SUITE_P(Schedules, InferenceTest,
                         ::testing::Values(PipelineSchedule::kGrouped,
                                           PipelineSchedule::kInterleaved,
                                           PipelineSchedule::kSequential),
                         [](const auto& info) {
                           return std::string(PipelineScheduleName(info.param));
                         });

// Stage 1 is two concurrent stages on IPUs 1 and 2 that receive the same
// arguments; stage 2 receives the concatenation of their outputs.
std::vector<ComputationalStage> ConcurrentModel(
    const std::map<std::string, Tensor>& init) {
  auto half = [&init](int which) {
    return [which, &init](const Scope& s, const std::vector<Output>& a) {
      std::vector<Output> h = ModelStage(0, s, a, init);  // Own w0/b0.
      Output scaled = ops::Mul(s, h[0], ops::Const(s, which ? 0.5f : 2.0f));
      return which ? std::vector<Output>{scaled}
                   : std::vector<Output>{scaled, a[1]};
    };
  };
  return {[](const Scope& s, const std::vector<Output>& a) {
            return std::vector<Output>{ops::Tanh(s, a[0]), a[1]};
          },
          {StageFunction(half(0)), StageFunction(half(1))},
          [&init](const Scope& s, const std::vector<Output>& a) {
            // a = {h_a, labels, h_b}.
            Output h = ops::Concat(s, {a[0], a[2]}, 1);  // [4, 16]
            Tensor w = ipuflow::testing::RandomTensor({16, 3}, -0.5, 0.5, 3);
            ops::VariableHandle v =
                ops::Variable(s.WithOpName("w_out"), ops::Const(s, w));
            return std::vector<Output>{
                ops::MatMul(s, h, ops::ReadVariable(s, v.handle)), a[1]};
          }};
}

TEST(ConcurrentStagesTest, TrainingMatchesTheSameGraphUnpipelined) {
  auto init = InitialValues(1);
  auto system = MakeSystem(4);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(6));
  PipelineOptions o;
  o.computational_stages = ConcurrentModel(init);
  o.device_mapping = {0, {1, 2}, 3};
  o.gradient_accumulation_count = 6;
  o.infeed_queue = infeed.get();
  o.optimizer_function = testing::SgdCrossEntropy(0.5f);
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto report = RunPipeline(strategy, **pipeline);
  ASSERT_TRUE(report.ok()) << report.status();
  // Concurrent parts ran on their own IPUs.
  std::set<int> ipus;
  for (const TimedItem& it : report->items) {
    if (it.stage == 1) ipus.insert(it.ipu);
  }
  EXPECT_EQ(ipus, (std::set<int>{1, 2}));

  // Reference: the same stage functions composed in one host graph, the
  // gradients summed over the 6 micro-batches, one SGD step.
  Scope rs = Scope::NewRootScope();
  Output x = ops::Placeholder(rs, DType::kFloat32, {4, 6});
  Output labels = ops::Placeholder(rs, DType::kInt32, {4});
  auto stages = ConcurrentModel(init);
  std::vector<Output> h = stages[0].functions[0].body(rs, {x, labels});
  std::vector<Output> a = stages[1].functions[0].body(rs.NewSubScope("a"), h);
  std::vector<Output> b = stages[1].functions[1].body(rs.NewSubScope("b"), h);
  a.insert(a.end(), b.begin(), b.end());
  std::vector<Output> out = stages[2].functions[0].body(rs, a);
  Output loss = ops::SoftmaxCrossEntropyLoss(rs, out[0], out[1]);
  optimizers::GradientDescentOptimizer sgd(0.5f);
  auto gv = sgd.ComputeGradients(rs, loss);
  ASSERT_TRUE(rs.ok()) << rs.status();
  Session session(rs.graph());
  ASSERT_TRUE(session.Initialize().ok());
  auto it = MicroBatches(6)->MakeIterator();
  std::vector<Tensor> sum;
  std::vector<Output> grads;
  for (const auto& g : gv) grads.push_back(g.grad);
  for (int m = 0; m < 6; ++m) {
    feeds::Element el = *it->GetNext();
    std::vector<Tensor> g;
    ASSERT_TRUE(session.Run({{x, el[0]}, {labels, el[1]}}, grads, &g).ok());
    if (sum.empty())
      sum = g;
    else
      for (size_t i = 0; i < g.size(); ++i)
        sum[i].flat<float>() += g[i].flat<float>();
  }
  // Compare each variable: initial - 0.5 * summed gradient.
  int compared = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    const std::string name = gv[i].variable->name();  // "a/w0", "w_out", ...
    Tensor initial = *session.resources()->FindVariable(name)->Read();
    Tensor expected = initial.Copy();
    expected.flat<float>() -= 0.5f * sum[i].flat<float>();
    for (int k = 0; k < 4; ++k) {
      for (const auto& v : system->device(k).resources()->variables()) {
        if (v->name() == "pipeline/stage1_0/w0" && name == "a/w0") {
          EXPECT_TRUE(
              ipuflow::testing::TensorNear(*v->Read(), expected, 1e-5, 1e-5));
          ++compared;
        } else if (v->name() == "pipeline/stage1_1/w0" && name == "b/w0") {
          EXPECT_TRUE(
              ipuflow::testing::TensorNear(*v->Read(), expected, 1e-5, 1e-5));
          ++compared;
        } else if (v->name() == "pipeline/stage2/w_out" && name == "w_out") {
          EXPECT_TRUE(
              ipuflow::testing::TensorNear(*v->Read(), expected, 1e-5, 1e-5));
          EXPECT_FALSE(
              ipuflow::testing::TensorNear(*v->Read(), initial, 1e-3, 1e-3));
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 3);
}

TEST(ConcurrentStagesTest, ConcurrentLastStageOutfeedsEachMicroBatchInOrder) {
  auto system = MakeSystem(3);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(24));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  auto scaled = [](float k) {
    return [k](const Scope& s, const std::vector<Output>& a) {
      return std::vector<Output>{ops::Mul(s, a[0], ops::Const(s, k))};
    };
  };
  PipelineOptions o;
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Tanh(s, a[0])};
      },
      {StageFunction(scaled(2)), StageFunction(scaled(-1))}};
  o.device_mapping = {0, {1, 2}};
  o.gradient_accumulation_count = 8;
  o.repeat_count = 3;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_TRUE(RunPipeline(strategy, **pipeline).ok());
  auto result = outfeed->Dequeue();
  ASSERT_TRUE(result.ok());
  // One element per micro-batch: part 0's output then part 1's.
  ASSERT_EQ(result->names, (std::vector<std::string>{"0", "1"}));
  const Tensor& a = (*result)["0"];
  const Tensor& b = (*result)["1"];
  ASSERT_EQ(a.shape(), TensorShape({24, 4, 6}));
  auto it = MicroBatches(24)->MakeIterator();
  for (int m = 0; m < 24; ++m) {
    Tensor x = (*it->GetNext())[0];
    Tensor expect_a = x.Copy(), expect_b = x.Copy();
    expect_a.flat<float>() = 2 * x.flat<float>().tanh();
    expect_b.flat<float>() = -x.flat<float>().tanh();
    EXPECT_TRUE(ipuflow::testing::TensorNear(
        a.Slice(m, m + 1), *expect_a.Reshaped({1, 4, 6}), 1e-6, 1e-6))
        << m;
    EXPECT_TRUE(ipuflow::testing::TensorNear(
        b.Slice(m, m + 1), *expect_b.Reshaped({1, 4, 6}), 1e-6, 1e-6))
        << m;
  }
}

TEST(PipelineRunTest, InputsAreGivenToTheFirstStageAndAccumulateOutfeedSums) {
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  Output scale = ops::Placeholder(scope, DType::kFloat32, {});
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(4));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& a) {
        // a = {scale, x, labels}: the scale is threaded to stage 1.
        return std::vector<Output>{a[0], a[1]};
      },
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Mul(s, a[1], a[0])};
      }};
  o.inputs = {scale};
  o.gradient_accumulation_count = 4;
  o.accumulate_outfeed = true;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto report =
      RunPipeline(strategy, **pipeline, {{scale, Tensor::Scalar(3.0f)}});
  ASSERT_TRUE(report.ok()) << report.status();
  auto result = outfeed->Dequeue();
  ASSERT_TRUE(result.ok());
  const Tensor& sum = (*result)["0"];
  ASSERT_EQ(sum.shape(), TensorShape({1, 4, 6}));  // One element per run.
  auto it = MicroBatches(4)->MakeIterator();
  Tensor expected(DType::kFloat32, {1, 4, 6});
  expected.flat<float>().setZero();
  for (int m = 0; m < 4; ++m)
    expected.flat<float>() += 3.0f * (*it->GetNext())[0].flat<float>();
  EXPECT_TRUE(ipuflow::testing::TensorNear(sum, expected, 1e-5, 1e-5));
}

TEST(PipelineRunTest, StageErrorIsNamedAndNothingBlocks) {
  auto system = MakeSystem(4);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  // 6 elements for 8 micro-batches: stage 0 runs dry at micro-batch 6 while
  // later stages wait for it and the first micro-batches are in flight.
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(6));
  auto init = InitialValues(1);
  PipelineOptions o;
  o.computational_stages = ModelStages(init);
  o.gradient_accumulation_count = 8;
  o.infeed_queue = infeed.get();
  o.optimizer_function = testing::SgdCrossEntropy(0.5f);
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_TRUE(strategy.Initialize(*scope.graph()).ok());
  auto report = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(report.status().message(), HasSubstr("micro-batch 6"));
  // The IPUs are free again: a plain program still runs on each.
  for (int k = 0; k < 4; ++k) {
    Notification done;
    system->device(k).Submit([&] { done.Notify(); });
    done.WaitForNotification();
  }
}

// Issue 9: a kernel error in a stage at a chosen micro-batch of one replica
// reaches the host naming the replica, the stage, the micro-batch and the
// node; the IPUs are usable for the next run.
TEST(PipelineRunTest, KernelErrorInAStageNamesReplicaStageMicroBatchAndNode) {
  auto system = MakeSystem(4);  // 2 replicas x 2 stages.
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  // Element i goes to replica i % 2; element 3 (replica 1's micro-batch 1)
  // indexes past the 3-element table.
  auto infeed = *feeds::IPUInfeedQueue::Create(
      feeds::FromTensorSlices({Tensor::FromVector<int32_t>({0, 1, 2, 9})}));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(s, a[0])};
      },
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{
            ops::Gather(s.WithOpName("pick"),
                        ops::Const<float>(s, {10, 20, 30}, {3}), a[0])};
      }};
  o.gradient_accumulation_count = 2;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto report = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("replica 1 (IPU 2)"));
  EXPECT_THAT(report.status().message(), HasSubstr("micro-batch 1"));
  EXPECT_THAT(report.status().message(), HasSubstr("pick'"));
  EXPECT_THAT(report.status().message(), HasSubstr("= 9 is out of range"));
  // The system runs the next computation on every IPU.
  Scope s = Scope::NewRootScope();
  auto out = strategy.Run(
      *s.graph(), {ops::Add(s, ops::Const(s, 1.0f), ops::Const(s, 1.0f))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].NumElements(), 4);
}

// IPUConfig.floating_point_behaviour reaches the stages: an oflo trap in
// the last stage stops the run like a kernel error, naming the micro-batch.
TEST(PipelineRunTest, FloatingPointTrapStopsTheRun) {
  IPUConfig config;
  config.set_auto_select_ipus(2);
  config.mutable_floating_point_behaviour()->set_oflo(true);
  auto system = std::move(IPUSystem::Create(config)).value();
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(
      feeds::FromTensorSlices({Tensor::FromVector<float>({1, 1e30f, 2, 3})}));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(s, a[0])};
      },
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{
            ops::Mul(s.WithOpName("scale"), a[0], ops::Const(s, 1e20f))};
      }};
  o.gradient_accumulation_count = 4;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto report = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("micro-batch 1"));
  EXPECT_THAT(report.status().message(),
              HasSubstr("floating-point exception (oflo): Mul '"));
  EXPECT_THAT(report.status().message(),
              HasSubstr("scale' output 0 element 0 is inf from finite inputs"));
}

// Issue 9: a run stopped by a kernel error ends where its outfeed ends.
// Element 5 of 0..13 fails in the last stage (micro-batch 1 of the second
// repeat) while the feeder has taken more: those go back to the infeed, so
// the next run outfeeds 6..13 and nothing is lost or repeated.
TEST(PipelineRunTest, AStoppedRunGivesBackWhatItDidNotProcess) {
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  std::vector<int32_t> index(14);
  for (int i = 0; i < 14; ++i) index[i] = i == 5 ? 9 : i % 3;
  std::vector<int64_t> ids(14);
  for (int i = 0; i < 14; ++i) ids[i] = i;
  auto infeed = *feeds::IPUInfeedQueue::Create(
      feeds::FromTensorSlices({Tensor::FromVector<int64_t>(ids),
                               Tensor::FromVector<int32_t>(index)}),
      /*prefetch_depth=*/4);
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  o.computational_stages = {
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Identity(s, a[0]),
                                   ops::Identity(s, a[1])};
      },
      [](const Scope& s, const std::vector<Output>& a) {
        return std::vector<Output>{
            ops::Identity(s, a[0]),
            ops::Gather(s.WithOpName("pick"),
                        ops::Const<float>(s, {10, 20, 30}, {3}), a[1])};
      }};
  o.gradient_accumulation_count = 4;
  o.repeat_count = 2;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto ids_out = [&] {
    std::vector<int64_t> got;
    for (const feeds::OutfeedElement& e : outfeed->TakeAvailable()) {
      got.push_back(e["0"].scalar<int64_t>());
    }
    return got;
  };
  auto first = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(first.status().message(), HasSubstr("micro-batch 1 of run 1"));
  EXPECT_THAT(ids_out(), ::testing::ElementsAre(0, 1, 2, 3, 4));
  auto second = RunPipeline(strategy, **pipeline);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(ids_out(), ::testing::ElementsAre(6, 7, 8, 9, 10, 11, 12, 13));
  EXPECT_EQ(infeed->elements_produced(), 14);
}

// Issue 10: output modes on a pipeline count device iterations (repeats):
// EveryN(2) sends repeats 1 and 3 with all their micro-batches, Final the
// last micro-batch, Sum the sum over every micro-batch of the run.
TEST(PipelineRunTest, OutputModesCountDeviceIterations) {
  struct Case {
    feeds::OutputMode mode;
    std::vector<float> want;
  };
  for (const Case& c :
       {Case{feeds::OutputMode::EveryN(2), {2, 3, 6, 7}},
        Case{feeds::OutputMode::Final(), {7}},
        Case{feeds::OutputMode::Sum(), {28}},
        Case{feeds::OutputMode::Default(), {0, 1, 2, 3, 4, 5, 6, 7}}}) {
    SCOPED_TRACE(c.mode.DebugString());
    auto system = MakeSystem(2);
    IPUStrategy strategy(system.get());
    Scope scope = Scope::NewRootScope();
    auto infeed = *feeds::IPUInfeedQueue::Create(feeds::FromTensorSlices(
        {Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7})}));
    auto outfeed = *feeds::IPUOutfeedQueue::Create(c.mode);
    PipelineOptions o;
    auto id = [](const Scope& s, const std::vector<Output>& a) {
      return std::vector<Output>{ops::Identity(s, a[0])};
    };
    o.computational_stages = {id, id};
    o.gradient_accumulation_count = 2;
    o.repeat_count = 4;
    o.infeed_queue = infeed.get();
    o.outfeed_queue = outfeed.get();
    auto pipeline = Pipeline::Create(scope, o);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    auto report = RunPipeline(strategy, **pipeline);
    ASSERT_TRUE(report.ok()) << report.status();
    auto got = outfeed->Dequeue();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(ipuflow::testing::TensorNear(
        (*got)["0"], c.want, {static_cast<int64_t>(c.want.size())}));
  }
}

TEST(PipelineRunTest, TooFewIpus) {
  auto system = MakeSystem(2);
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  auto infeed = *feeds::IPUInfeedQueue::Create(MicroBatches(4));
  auto outfeed = *feeds::IPUOutfeedQueue::Create();
  PipelineOptions o;
  auto id = [](const Scope& s, const std::vector<Output>& a) {
    return std::vector<Output>{ops::Tanh(s, a[0])};
  };
  o.computational_stages = {id, id, id};
  o.gradient_accumulation_count = 3;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  auto pipeline = Pipeline::Create(scope, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto report = RunPipeline(strategy, **pipeline);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(),
              HasSubstr("pipeline 'pipeline' uses 3 IPUs per replica but "
                        "the system has 2"));
}

}  // namespace
}  // namespace ipuflow::pipelining
