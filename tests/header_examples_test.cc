// The usage examples of header comments, compiled and run. For each header
// a function sets up what its example needs, then holds the example's lines
// exactly as the header shows them, between the markers
// "// BEGIN EXAMPLE <header>" and "// END EXAMPLE"; a test runs it. The
// sync test reads each header and this file (Bazel data) and fails, naming
// the header and the first line that differs, unless the header's comment
// holds the marked lines as one run of "//   ..." lines (whitespace
// collapsed): change an example in one place and it says where the other
// is. The blocks are "clang-format off" to keep the header's line breaks,
// which the check compares. Another header's example: a function with a
// block here, the header in kHeaders and in the test's BUILD data. A
// Markdown file's example (README.md's "A taste") is its ```cpp block, the
// same lines without the "//".
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "core/half.h"
#include "core/hash_mix.h"
#include "core/ipu/device_program.h"
#include "core/ipu/executable.h"
#include "core/ipu/ipu_device.h"
#include "core/ipu/ipu_strategy.h"
#include "core/ipu/ipu_system.h"
#include "core/program.h"
#include "core/scope.h"
#include "core/session.h"
#include "core/status.h"
#include "core/tensor.h"
#include "examples/models.h"
#include "feeds/dataset.h"
#include "feeds/fashion_mnist.h"
#include "feeds/infeed_queue.h"
#include "feeds/ipu_iterator.h"
#include "feeds/outfeed_queue.h"
#include "feeds/outfeed_result.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/array/scatter_add.h"
#include "ops/array/stack.h"
#include "ops/collective/reduce_scatter.h"
#include "ops/collective/replica_index.h"
#include "ops/control/loops.h"
#include "ops/control/pipeline_frame.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mat_mul.h"
#include "ops/math/mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/reduce_sum.h"
#include "ops/math/square.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/nn/tanh.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"
#include "optimizers/adamw.h"
#include "optimizers/gradient_descent.h"
#include "optimizers/test_util.h"
#include "pipelining/balanced_model.h"
#include "pipelining/execution_strategy.h"
#include "pipelining/pipeline.h"

namespace ipuflow {
namespace {

// Issue 35's twelve headers, then the five reflowed examples found since,
// then the README's taste of the API. Each must have a block here.
const char* const kHeaders[] = {
    "core/ipu/executable.h",
    "core/ipu/ipu_strategy.h",
    "core/ipu/device_program.h",
    "core/ipu/ipu_system.h",
    "core/ipu/ipu_device.h",
    "ops/control/pipeline_frame.h",
    "ops/array/stack.h",
    "ops/array/scatter_add.h",
    "ops/collective/reduce_scatter.h",
    "feeds/outfeed_queue.h",
    "feeds/ipu_iterator.h",
    "pipelining/execution_strategy.h",
    "core/hash_mix.h",
    "ops/state/assign.h",
    "optimizers/test_util.h",
    "pipelining/balanced_model.h",
    "README.md",
    "pipelining/pipeline.h",
};

constexpr char kThisFile[] = "tests/header_examples_test.cc";

// Few threads per IPU: the examples are tiny and the host may be busy.
absl::StatusOr<std::unique_ptr<IPUSystem>> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  config.set_intra_op_threads_per_ipu(1);
  return IPUSystem::Create(config);
}

// A dense layer with a variable "w" (identity times `scale`), then tanh.
pipelining::StageBody DenseTanh(float scale) {
  return [scale](const Scope& s, const std::vector<Output>& args) {
    ops::VariableHandle w = ops::Variable(
        s.WithOpName("w"), ops::Const<float>(s, {scale, 0, 0, scale}, {2, 2}));
    return std::vector<Output>{ops::Tanh(s, ops::MatMul(s, args[0], w.value))};
  };
}

// tanh(scale x): a stage without variables.
pipelining::StageBody ScaledTanh(float scale) {
  return [scale](const Scope& s, const std::vector<Output>& args) {
    return std::vector<Output>{
        ops::Tanh(s, ops::Mul(s, args[0], ops::Const(s, scale)))};
  };
}

// `n` micro-batches of [2, 2] values.
feeds::DatasetPtr MicroBatches(int n) {
  std::vector<float> values(n * 4);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * i;
  return feeds::FromTensorSlices(
             {Tensor::FromVector<float>(values, {2 * n, 2})})
      ->Batch(2, /*drop_remainder=*/true);
}

// A two-stage inference pipeline over IPUs 0 and 1, micro_batches per run;
// each stage has a variable "w" if `variables`.
pipelining::PipelineOptions TwoStageInference(feeds::IPUInfeedQueue* infeed,
                                              feeds::IPUOutfeedQueue* outfeed,
                                              int micro_batches,
                                              bool variables) {
  pipelining::PipelineOptions options;
  if (variables) {
    options.computational_stages = {DenseTanh(1.0f), DenseTanh(0.5f)};
  } else {
    options.computational_stages = {ScaledTanh(1.0f), ScaledTanh(0.5f)};
  }
  options.device_mapping = {0, 1};
  options.gradient_accumulation_count = micro_batches;
  options.infeed_queue = infeed;
  options.outfeed_queue = outfeed;
  return options;
}

absl::Status Near(const Tensor& t, const std::vector<float>& expected) {
  std::vector<float> got = t.ToVector<float>();
  bool ok = got.size() == expected.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    ok = std::abs(got[i] - expected[i]) <= 1e-5f * (1 + std::abs(expected[i]));
  }
  if (ok) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("got [", absl::StrJoin(got, " "),
                                          "], expected [",
                                          absl::StrJoin(expected, " "), "]"));
}

// core/ipu/executable.h: one training step on 2 replicas.
absl::Status ExecutableExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(2));
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  Graph& graph = *scope.graph();
  Output x = ops::Placeholder(scope, DType::kFloat32, {2, 3});
  ops::VariableHandle weights =
      ops::Variable(scope.NewSubScope("dense").WithOpName("w"),
                    ops::Const<float>(scope, {1, 1, 1}, {3, 1}));
  Output loss = ops::ReduceMean(
      scope, ops::Square(scope, ops::MatMul(scope, x, weights.value)));
  optimizers::GradientDescentOptimizer sgd(0.1f);
  Node* train = sgd.Minimize(scope, loss);
  RETURN_IF_ERROR(scope.status());
  RETURN_IF_ERROR(strategy.Initialize(graph));
  Tensor batch = Tensor::FromVector<float>({1, 0, 0, 0, 1, 0}, {2, 3});
  // clang-format off
  // BEGIN EXAMPLE core/ipu/executable.h
  ASSIGN_OR_RETURN(Executable* exe,
                   strategy.Compile(graph, {loss}, {train}, {{x, batch}}));
  std::vector<std::vector<Tensor>> results;              // [replica][fetch]
  RETURN_IF_ERROR(exe->Execute({{batch}}, &results));    // to every replica
  ASSIGN_OR_RETURN(auto w, exe->ReadVariables(".*/w"));  // [name][replica]
  // END EXAMPLE
  // clang-format on
  if (results.size() != 2) return absl::InternalError("not 2 replicas");
  RETURN_IF_ERROR(Near(results[1][0], {1}));  // mean of 1^2 and 1^2
  // w -= 0.1 * mean(2 y x): [1 1 1] - 0.1 * [1 1 0], on each replica.
  if (w["dense/w"].size() != 2) return absl::InternalError("not 2 values");
  return Near(w["dense/w"][1], {0.9f, 0.9f, 1});
}

// core/ipu/ipu_strategy.h: a step run twice, compiled once.
absl::Status IpuStrategyExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(2));
  Scope scope = Scope::NewRootScope();
  ops::VariableHandle w =
      ops::Variable(scope.WithOpName("w"), ops::Const(scope, 2.0f));
  Output loss = ops::Square(scope, w.value);
  optimizers::GradientDescentOptimizer sgd(0.25f);
  Node* train_op = sgd.Minimize(scope, loss);
  RETURN_IF_ERROR(scope.status());
  // clang-format off
  // BEGIN EXAMPLE core/ipu/ipu_strategy.h
  IPUStrategy strategy(system.get());
  RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));   // every replica
  ASSIGN_OR_RETURN(std::vector<Tensor> out,
                   strategy.Run(*scope.graph(), {loss}, {train_op}));
  strategy.num_compiles();   // 2 (initializers, step), however many Runs
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(Near(out[0], {4, 4}));  // one loss per replica
  RETURN_IF_ERROR(strategy.Run(*scope.graph(), {loss}, {train_op}).status());
  if (strategy.num_compiles() != 2) return absl::InternalError("recompiled");
  return absl::OkStatus();
}

// core/ipu/ipu_strategy.h: a pipeline of 2 stages, 2 replicas.
absl::Status IpuStrategyPipelineExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(4));
  IPUStrategy strategy(system.get());
  ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(MicroBatches(4)));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  Scope scope = Scope::NewRootScope();
  pipelining::PipelineOptions options =
      TwoStageInference(infeed.get(), outfeed.get(), 2, /*variables=*/true);
  // clang-format off
  // BEGIN EXAMPLE core/ipu/ipu_strategy.h
  ASSIGN_OR_RETURN(auto pipeline,
                   pipelining::Pipeline::Create(scope, options));
  RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));  // its variables
  ASSIGN_OR_RETURN(
      DeviceProgram* exe,  // as for a loop
      strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
  std::vector<std::vector<Tensor>> results;
  RETURN_IF_ERROR(exe->Execute({{}}, &results));  // results: by outfeed
  auto report = pipeline->last_report();          // replica 0's
  ASSIGN_OR_RETURN(auto w, exe->ReadVariables(".*/w"));  // per replica
  // END EXAMPLE
  // clang-format on
  if (!report.has_value()) return absl::InternalError("no report");
  // Each stage's "w" on each of the 2 replicas.
  if (w.size() != 2 || w.begin()->second.size() != 2) {
    return absl::InternalError("not 2 variables x 2 replicas");
  }
  return Near(w["pipeline/stage1/w"][1], {0.5f, 0, 0, 0.5f});
}

// core/ipu/device_program.h: y = 2 x on 2 replicas.
absl::Status DeviceProgramExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> owned, MakeSystem(2));
  IPUSystem& system = *owned;
  Scope scope = Scope::NewRootScope();
  const Graph& graph = *scope.graph();
  Output x = ops::Placeholder(scope, DType::kFloat32, {2});
  Output y = ops::Mul(scope, x, ops::Const(scope, 2.0f));
  RETURN_IF_ERROR(scope.status());
  ProgramSpec spec;
  spec.feeds = {x};
  spec.feed_shapes = {TensorShape({2})};
  spec.fetches = {y};
  std::vector<Tensor> feeds = {Tensor::FromVector<float>({1, 2})};
  // clang-format off
  // BEGIN EXAMPLE core/ipu/device_program.h
  ASSIGN_OR_RETURN(auto program,
                   DeviceProgram::Compile(&system, graph, spec));
  std::vector<std::vector<Tensor>> results;  // [replica][fetch]
  RETURN_IF_ERROR(program->Execute({feeds}, &results));
  // END EXAMPLE
  // clang-format on
  if (results.size() != 2) return absl::InternalError("not 2 replicas");
  return Near(results[1][0], {2, 4});
}

// core/ipu/ipu_system.h; returns IPU 2's memory budget.
absl::StatusOr<int64_t> IpuSystemExample() {
  // clang-format off
  // BEGIN EXAMPLE core/ipu/ipu_system.h
  IPUConfig config;
  config.set_auto_select_ipus(4);
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system,
                   IPUSystem::Create(config));
  system->device(2).memory_budget_bytes();  // 1472 tiles x 624 KiB
  // END EXAMPLE
  // clang-format on
  if (system->num_ipus() != 4) return absl::InternalError("not 4 IPUs");
  return system->device(2).memory_budget_bytes();
}

// core/ipu/ipu_device.h: a program run on IPU 0's thread.
absl::Status IpuDeviceExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> owned, MakeSystem(1));
  IPUSystem& system = *owned;
  Scope scope = Scope::NewRootScope();
  Output x = ops::Placeholder(scope, DType::kFloat32, {2});
  Output y = ops::Add(scope, x, ops::Const(scope, 1.0f));
  RETURN_IF_ERROR(scope.status());
  ProgramSpec spec;
  spec.feeds = {x};
  spec.feed_shapes = {TensorShape({2})};
  spec.fetches = {y};
  ASSIGN_OR_RETURN(std::unique_ptr<Program> program,
                   Program::Compile(*scope.graph(), spec));
  RunEnv env = IpuRunEnv(system, 0, 0, 1, nullptr);
  std::vector<Tensor> feeds = {Tensor::FromVector<float>({1, 2})};
  std::vector<Tensor> out;
  absl::Status status;
  // clang-format off
  // BEGIN EXAMPLE core/ipu/ipu_device.h
  IPUDevice& ipu = system.device(0);
  absl::Notification done;
  ipu.Submit([&] {  // runs on the IPU's thread, after earlier tasks
    status = program->Run(env, feeds, &out);
    done.Notify();
  });
  done.WaitForNotification();
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(status);
  return Near(out[0], {2, 3});
}

// ops/control/pipeline_frame.h: a pipeline's frame run on 2 replicas.
absl::Status PipelineFrameExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(4));
  IPUStrategy strategy(system.get());
  ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(MicroBatches(4)));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  Scope scope = Scope::NewRootScope();
  pipelining::PipelineOptions options =
      TwoStageInference(infeed.get(), outfeed.get(), 2, /*variables=*/false);
  std::vector<std::vector<Tensor>> results;
  // clang-format off
  // BEGIN EXAMPLE ops/control/pipeline_frame.h
  ASSIGN_OR_RETURN(auto pipeline,
                   pipelining::Pipeline::Create(scope, options));
  ASSIGN_OR_RETURN(
      DeviceProgram* exe,
      strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
  RETURN_IF_ERROR(exe->Execute({{}}, &results));  // every replica
  // END EXAMPLE
  // clang-format on
  ASSIGN_OR_RETURN(feeds::OutfeedResult out, outfeed->Dequeue());
  // [micro-batches, replicas, batch, features]
  if (out.tensors[0].shape() != TensorShape({2, 2, 2, 2})) {
    return absl::InternalError(out.tensors[0].shape().DebugString());
  }
  return absl::OkStatus();
}

// ops/array/stack.h; returns (batch, pairs).
absl::StatusOr<std::vector<Tensor>> StackExample() {
  Scope scope = Scope::NewRootScope();
  Output a = ops::Const<float>(scope, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output b = ops::Mul(scope, a, ops::Const(scope, 2.0f));
  Output c = ops::Mul(scope, a, ops::Const(scope, 3.0f));
  Output x = ops::Const<float>(scope, {1, 2, 3, 4}, {4});
  Output y = ops::Const<float>(scope, {5, 6, 7, 8}, {4});
  // clang-format off
  // BEGIN EXAMPLE ops/array/stack.h
  Output batch = ops::Stack(scope, {a, b, c});   // 3 x [H,W] -> [3,H,W]
  Output pairs = ops::Stack(scope, {x, y}, -1);  // 2 x [N] -> [N,2]
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(scope.status());
  Session session(scope.graph());
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run({}, {batch, pairs}, &out));
  return out;
}

// ops/array/scatter_add.h; returns (dx, picked).
absl::StatusOr<std::vector<Tensor>> ScatterAddExample() {
  Scope scope = Scope::NewRootScope();
  Output x = ops::Const<float>(scope, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  Output logits = x;
  Output idx = ops::Const<int32_t>(scope, {3, 1, 0, 2}, {2, 2});  // 2 per row
  Output dvalues = ops::Const<float>(scope, {10, 20, 30, 40}, {2, 2});
  // clang-format off
  // BEGIN EXAMPLE ops/array/scatter_add.h
  // TopK's gradient: dvalues put back at their positions.
  Output dx =
      ops::ScatterAdd(scope, ops::ZerosLike(scope, x), idx, dvalues, -1);
  Output picked = ops::TakeAlongAxis(scope, logits, idx, -1);
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(scope.status());
  Session session(scope.graph());
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run({}, {dx, picked}, &out));
  return out;
}

// ops/collective/reduce_scatter.h, on 4 replicas; returns (shard, half).
absl::StatusOr<std::vector<Tensor>> ReduceScatterExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(4));
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  Output r1 = ops::Add(
      scope, ops::Cast(scope, ops::ReplicaIndex(scope), DType::kFloat32),
      ops::Const(scope, 1.0f));
  Output x =
      ops::Mul(scope, ops::Const<float>(scope, {1, 2, 3, 4, 5}, {5}), r1);
  // clang-format off
  // BEGIN EXAMPLE ops/collective/reduce_scatter.h
  // 4 replicas, x = [1 2 3 4 5] * (r+1): replica 0 gets [10 20],
  // 1 gets [30 40], 2 gets [50 0], 3 gets [0 0].
  Output shard = ops::ReduceScatter(scope, x);
  Output half =
      ops::ReduceScatter(scope, x, CollectiveGroup::ReduceOp::kMean,
                         ReplicaGroups::Consecutive(2));
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(scope.status());
  return strategy.Run(*scope.graph(), {shard, half});
}

// feeds/outfeed_queue.h: 4 steps of a device loop.
absl::Status OutfeedQueueExample() {
  using feeds::IPUOutfeedQueue;
  using feeds::OutfeedElement;
  using feeds::OutfeedResult;
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(1));
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  Output x = ops::Const<float>(scope, {1, 3}, {2});
  // clang-format off
  // BEGIN EXAMPLE feeds/outfeed_queue.h
  ASSIGN_OR_RETURN(auto outfeed, IPUOutfeedQueue::Create());
  auto body = [&](const Scope& s, const std::vector<Output>&) {
    outfeed->Enqueue(s, {{"loss", ops::ReduceMean(s, x)}});  // each step
    return std::vector<Output>{};
  };
  ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(scope, 4, body));
  RETURN_IF_ERROR(strategy.Run(*scope.graph(), {}, {loop.op}).status());
  absl::StatusOr<OutfeedElement> first = outfeed->Next();  // blocks
  ASSIGN_OR_RETURN(OutfeedResult rest, outfeed->Dequeue());  // 3 steps
  rest["loss"].shape();  // [3], or [3, replicas] with replication
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(first.status());
  RETURN_IF_ERROR(Near(first->tensors[0], {2}));
  if (rest["loss"].shape() != TensorShape({3})) {
    return absl::InternalError(rest["loss"].shape().DebugString());
  }
  return absl::OkStatus();
}

// feeds/ipu_iterator.h: 100 elements summed on the device; returns the
// total.
absl::StatusOr<float> IpuIteratorExample() {
  using feeds::IPUIterator;
  using feeds::OutfeedElement;
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(1));
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  std::vector<float> values(200);
  for (int i = 0; i < 200; ++i) values[i] = i;
  feeds::DatasetPtr dataset =
      feeds::FromTensorSlices({Tensor::FromVector<float>(values, {100, 2})});
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  // clang-format off
  // BEGIN EXAMPLE feeds/ipu_iterator.h
  ASSIGN_OR_RETURN(auto it, IPUIterator::Create(dataset));
  auto body = [&](const Scope& s, const std::vector<Output>&) {
    std::vector<Output> x = it->Next(s);  // this iteration's element
    outfeed->Enqueue(s, {ops::ReduceSum(s, x[0])});
    return std::vector<Output>{};
  };
  ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(scope, 100, body));
  RETURN_IF_ERROR(strategy.Run(*scope.graph(), {}, {loop.op}).status());
  float total = 0;
  for (const OutfeedElement& e : *outfeed) {
    total += e.tensors[0].scalar<float>();
  }
  // END EXAMPLE
  // clang-format on
  return total;
}

// pipelining/execution_strategy.h: three blocks on two stages, run once.
absl::Status ExecutionStrategyExample() {
  using pipelining::ApplyStrategy;
  using pipelining::BlockModel;
  using pipelining::Pipeline;
  using pipelining::PipelinedExecution;
  using pipelining::PipelineOptions;
  using pipelining::Stage;
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(2));
  IPUStrategy strategy(system.get());
  ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(MicroBatches(8)));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  Scope scope = Scope::NewRootScope();
  pipelining::StageBody layer1 = DenseTanh(1.0f);
  pipelining::StageBody layer2 = DenseTanh(0.5f);
  pipelining::StageBody layer3 = DenseTanh(2.0f);
  // clang-format off
  // BEGIN EXAMPLE pipelining/execution_strategy.h
  BlockModel model;
  RETURN_IF_ERROR(model.Add("B1", layer1));   // with poptorch.Block("B1"):
  RETURN_IF_ERROR(model.Add("B2", layer2));
  RETURN_IF_ERROR(model.Add("B3", layer3));
  PipelineOptions o;
  RETURN_IF_ERROR(ApplyStrategy(
      model,
      PipelinedExecution(Stage("B1", "B2").Ipu(0), Stage("B3").Ipu(1)), &o));
  o.gradient_accumulation_count = 8;  // then as for Pipeline::Create()
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(scope, o));
  // END EXAMPLE
  // clang-format on
  if (pipeline->num_stages() != 2) return absl::InternalError("not 2 stages");
  RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));
  ASSIGN_OR_RETURN(DeviceProgram * exe,
                   strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
  std::vector<std::vector<Tensor>> results;
  RETURN_IF_ERROR(exe->Execute({{}}, &results));
  ASSIGN_OR_RETURN(feeds::OutfeedResult out, outfeed->Dequeue());
  if (out.tensors[0].dim(0) != 8) return absl::InternalError("not 8 steps");
  return absl::OkStatus();
}

// core/hash_mix.h; returns the bits of elements i and i + 1.
std::pair<uint32_t, uint32_t> HashMixExample(int64_t i) {
  const uint64_t seed = 7;
  const int node_id = 3;
  // clang-format off
  // BEGIN EXAMPLE core/hash_mix.h
  uint64_t key = Mix64(seed ^ Mix64(node_id));
  uint32_t bits =
      Mix32(Mix32(uint32_t(i) ^ uint32_t(key)) ^ uint32_t(key >> 32));
  // END EXAMPLE
  // clang-format on
  const uint32_t next =
      Mix32(Mix32(uint32_t(i + 1) ^ uint32_t(key)) ^ uint32_t(key >> 32));
  return {bits, next};
}

// ops/state/assign.h; returns (w, step) after the run.
absl::StatusOr<std::vector<Tensor>> AssignExample() {
  Scope scope = Scope::NewRootScope();
  ops::VariableHandle w = ops::Variable(scope.WithOpName("w"),
                                        ops::Const<float>(scope, {0, 0}, {2}));
  ops::VariableHandle step =
      ops::Variable(scope.WithOpName("step"), ops::Const(scope, 0.0f));
  Session session(scope.graph());
  RETURN_IF_ERROR(session.Initialize());
  // clang-format off
  // BEGIN EXAMPLE ops/state/assign.h
  Node* init = ops::Assign(scope, w.handle,
                           ops::Const<float>(scope, {1, 2}, {2}));
  Node* inc = ops::AssignAdd(scope, step.handle, ops::Const(scope, 1.f));
  RETURN_IF_ERROR(session.Run({}, {}, {init, inc}, nullptr));
  // END EXAMPLE
  // clang-format on
  RETURN_IF_ERROR(scope.status());
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run({}, {w.value, step.value}, &out));
  return out;
}

// optimizers/test_util.h; returns w after the step.
std::vector<Tensor> TestUtilExample() {
  using optimizers::GradientDescentOptimizer;
  using optimizers::testing::LinearLoss;
  using optimizers::testing::RunSteps;
  // clang-format off
  // BEGIN EXAMPLE optimizers/test_util.h
  Scope s = Scope::NewRootScope();
  LinearLoss l(s, "w", {1, 2});               // loss = sum(w * c)
  Node* train = GradientDescentOptimizer(0.1f).Minimize(s, l.loss);
  std::vector<Tensor> w =
      RunSteps(s, train, {l.Feed({0.5f, -1})}, l.w.value);  // one step
  // END EXAMPLE
  // clang-format on
  return w;
}

// pipelining/balanced_model.h; returns the options built.
pipelining::PipelineOptions BalancedModelExample() {
  using pipelining::DenseTanhStage;
  using pipelining::MeanSquareSgd;
  pipelining::PipelineOptions o;
  // clang-format off
  // BEGIN EXAMPLE pipelining/balanced_model.h
  for (int s = 0; s < 4; ++s) {
    o.computational_stages.push_back(DenseTanhStage(s, 256, 2));
  }
  o.optimizer_function = MeanSquareSgd(0.01f);
  // END EXAMPLE
  // clang-format on
  return o;
}

// pipelining/pipeline.h: 4 stages trained over 10 x 16 micro-batches.
absl::Status PipelineExample() {
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system, MakeSystem(4));
  IPUStrategy strategy(system.get());
  ASSIGN_OR_RETURN(auto infeed,
                   feeds::IPUInfeedQueue::Create(MicroBatches(160)));
  ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
  Scope scope = Scope::NewRootScope();
  using pipelining::OptimizerFunctionOutput;
  pipelining::StageBody stage1 = DenseTanh(1.0f);
  pipelining::StageBody stage2 = DenseTanh(0.5f);
  pipelining::StageBody stage3 = DenseTanh(2.0f);
  // Variables on every IPU: Initialize's program then spans all 4.
  pipelining::StageBody stage4 = [](const Scope& s,
                                    const std::vector<Output>& args) {
    Output y = DenseTanh(1.5f)(s, args)[0];
    return std::vector<Output>{ops::ReduceMean(s, ops::Square(s, y))};
  };
  // clang-format off
  // BEGIN EXAMPLE pipelining/pipeline.h
  pipelining::PipelineOptions o;
  o.computational_stages = {stage1, stage2, stage3, stage4};
  o.device_mapping = {0, 1, 2, 3};
  o.gradient_accumulation_count = 16;
  o.repeat_count = 10;
  o.infeed_queue = infeed.get();
  o.outfeed_queue = outfeed.get();
  o.optimizer_function = [](const Scope& s, const std::vector<Output>& out) {
    return OptimizerFunctionOutput{
        std::make_shared<optimizers::AdamWOptimizer>(1e-3f), out[0]};
  };
  ASSIGN_OR_RETURN(auto pipeline, pipelining::Pipeline::Create(scope, o));
  RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));  // variables, slots
  ASSIGN_OR_RETURN(
      DeviceProgram* exe,
      strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
  std::vector<std::vector<Tensor>> results;  // Empty: results leave by
  RETURN_IF_ERROR(exe->Execute({{}}, &results));  // the outfeed.
  std::cout << pipeline->last_report()->Summary();
  // END EXAMPLE
  // clang-format on
  if (pipeline->last_report()->repeats != 10) {
    return absl::InternalError("not 10 repeats");
  }
  return absl::OkStatus();
}

// README.md, "A taste": ten ConvNet training steps in a device loop on
// real Fashion-MNIST batches, the losses read from the outfeed.
absl::Status ReadmeExample() {
  // clang-format off
  // BEGIN EXAMPLE README.md
Scope root = Scope::NewRootScope();
ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(
    feeds::FashionMnist(feeds::Split::kTrain)->Batch(40, true)->Repeat()));
ASSIGN_OR_RETURN(auto outfeed, feeds::IPUOutfeedQueue::Create());
models::ConvNetParams params = models::CreateConvNetParams(root);
optimizers::AdamWOptimizer adamw(1e-3f);
ASSIGN_OR_RETURN(loops::Loop loop, loops::Repeat(root, 10,
    [&](const Scope& s, const std::vector<Output>& batch) {
      Output logits = models::ConvNet(s, params, batch[0]);
      Output loss = ops::SoftmaxCrossEntropyLoss(s, logits, batch[1]);
      adamw.Minimize(s, loss);
      outfeed->Enqueue(s, {{"loss", loss}});
      return std::vector<Output>{};
    }, {}, infeed.get()));
ASSIGN_OR_RETURN(auto system, IPUSystem::Create(IPUConfig()));
IPUStrategy strategy(system.get());
RETURN_IF_ERROR(strategy.Initialize(*root.graph()));
RETURN_IF_ERROR(strategy.Run(*root.graph(), {}, {loop.op}).status());
ASSIGN_OR_RETURN(feeds::OutfeedResult losses, outfeed->Dequeue());  // [10]
  // END EXAMPLE
  // clang-format on
  const Tensor& l = losses["loss"];
  if (l.shape() != TensorShape({10})) {
    return absl::InternalError(
        absl::StrCat("losses ", l.shape().DebugString()));
  }
  for (float v : l.ToVector<float>()) {
    // Ten classes, Glorot-initialised: the first losses are near ln 10.
    if (!(v > 0 && v < 5)) return absl::InternalError(absl::StrCat("loss ", v));
  }
  return absl::OkStatus();
}

TEST(HeaderExamplesTest, Readme) {
  EXPECT_EQ(ReadmeExample(), absl::OkStatus());
}

TEST(HeaderExamplesTest, Executable) {
  EXPECT_EQ(ExecutableExample(), absl::OkStatus());
}
TEST(HeaderExamplesTest, IpuStrategy) {
  EXPECT_EQ(IpuStrategyExample(), absl::OkStatus());
}
TEST(HeaderExamplesTest, IpuStrategyPipeline) {
  EXPECT_EQ(IpuStrategyPipelineExample(), absl::OkStatus());
}
TEST(HeaderExamplesTest, DeviceProgram) {
  EXPECT_EQ(DeviceProgramExample(), absl::OkStatus());
}

TEST(HeaderExamplesTest, IpuSystem) {
  absl::StatusOr<int64_t> budget = IpuSystemExample();
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(*budget, int64_t{1472} * 624 * 1024);
}

TEST(HeaderExamplesTest, IpuDevice) {
  EXPECT_EQ(IpuDeviceExample(), absl::OkStatus());
}
TEST(HeaderExamplesTest, PipelineFrame) {
  EXPECT_EQ(PipelineFrameExample(), absl::OkStatus());
}

TEST(HeaderExamplesTest, Stack) {
  absl::StatusOr<std::vector<Tensor>> out = StackExample();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 2, 3}));
  EXPECT_EQ((*out)[1].shape(), TensorShape({4, 2}));
  EXPECT_EQ(Near((*out)[1], {1, 5, 2, 6, 3, 7, 4, 8}), absl::OkStatus());
}

TEST(HeaderExamplesTest, ScatterAdd) {
  absl::StatusOr<std::vector<Tensor>> out = ScatterAddExample();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Near((*out)[0], {0, 20, 0, 10, 30, 0, 40, 0}), absl::OkStatus());
  EXPECT_EQ(Near((*out)[1], {4, 2, 5, 7}), absl::OkStatus());
}

TEST(HeaderExamplesTest, ReduceScatter) {
  absl::StatusOr<std::vector<Tensor>> out = ReduceScatterExample();
  ASSERT_TRUE(out.ok()) << out.status();
  // As the header says: [10 20], [30 40], [50 0], [0 0].
  EXPECT_EQ((*out)[0].shape(), TensorShape({4, 2}));
  EXPECT_EQ(Near((*out)[0], {10, 20, 30, 40, 50, 0, 0, 0}), absl::OkStatus());
  // Means over {0,1}: 1.5 x, and {2,3}: 3.5 x, in chunks of 3.
  EXPECT_EQ(
      Near((*out)[1], {1.5, 3, 4.5, 6, 7.5, 0, 3.5, 7, 10.5, 14, 17.5, 0}),
      absl::OkStatus());
}

TEST(HeaderExamplesTest, OutfeedQueue) {
  EXPECT_EQ(OutfeedQueueExample(), absl::OkStatus());
}

TEST(HeaderExamplesTest, IpuIterator) {
  absl::StatusOr<float> total = IpuIteratorExample();
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 199 * 200 / 2);
}

TEST(HeaderExamplesTest, ExecutionStrategy) {
  EXPECT_EQ(ExecutionStrategyExample(), absl::OkStatus());
}

TEST(HeaderExamplesTest, HashMix) {
  auto [bits, next] = HashMixExample(5);
  EXPECT_EQ(HashMixExample(5).first, bits);  // a function of (key, i) only
  EXPECT_NE(bits, next);
}

TEST(HeaderExamplesTest, Assign) {
  absl::StatusOr<std::vector<Tensor>> out = AssignExample();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Near((*out)[0], {1, 2}), absl::OkStatus());
  EXPECT_EQ(Near((*out)[1], {1}), absl::OkStatus());
}

TEST(HeaderExamplesTest, TestUtil) {
  std::vector<Tensor> w = TestUtilExample();
  ASSERT_EQ(w.size(), 1u);
  // w - 0.1 c: [1 2] - 0.1 [0.5 -1].
  EXPECT_EQ(Near(w[0], {0.95f, 2.1f}), absl::OkStatus());
}

TEST(HeaderExamplesTest, BalancedModel) {
  pipelining::PipelineOptions o = BalancedModelExample();
  EXPECT_EQ(o.computational_stages.size(), 4u);
  EXPECT_TRUE(o.optimizer_function != nullptr);
}

TEST(HeaderExamplesTest, Pipeline) {
  EXPECT_EQ(PipelineExample(), absl::OkStatus());
}

// The sync check.

std::string ReadRunfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  std::ifstream in(absl::StrCat(srcdir ? srcdir : ".", "/",
                                workspace ? workspace : "ipuflow", "/", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whitespace runs as one space, none at the ends.
std::string Collapse(absl::string_view line) {
  return absl::StrJoin(
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty()), " ");
}

struct ExampleBlock {
  std::string header;
  int line = 0;  // Of the block's first line in the source, from 1.
  std::vector<std::string> lines;
};

// The marked blocks of `source`; an unterminated or nested block, or an
// empty line inside one, is an error naming its line.
absl::StatusOr<std::vector<ExampleBlock>> ParseBlocks(
    const std::string& source) {
  constexpr absl::string_view kBegin = "// BEGIN EXAMPLE ";
  constexpr absl::string_view kEnd = "// END EXAMPLE";
  std::vector<ExampleBlock> blocks;
  std::optional<ExampleBlock> open;
  int n = 0;
  for (absl::string_view raw : absl::StrSplit(source, '\n')) {
    ++n;
    const std::string line = Collapse(raw);
    if (absl::StartsWith(line, kBegin)) {
      if (open) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", n, ": BEGIN inside a block"));
      }
      open = ExampleBlock{std::string(line.substr(kBegin.size())), n + 1, {}};
    } else if (line == kEnd) {
      if (!open) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", n, ": END without BEGIN"));
      }
      blocks.push_back(*std::move(open));
      open.reset();
    } else if (open) {
      if (line.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", n, ": empty line in the example of ", open->header));
      }
      open->lines.push_back(line);
    }
  }
  if (open) {
    return absl::InvalidArgumentError(
        absl::StrCat(open->header, ": no END EXAMPLE"));
  }
  return blocks;
}

// "" if `header_text` has the block's lines as consecutive "//   ..."
// comment lines; otherwise what differs, with line numbers.
std::string CheckBlock(const std::string& header_text,
                       const ExampleBlock& block,
                       absl::string_view source_name) {
  std::vector<std::string> header = absl::StrSplit(header_text, '\n');
  const bool markdown = absl::EndsWith(block.header, ".md");
  auto example_line = [&](size_t i) -> std::optional<std::string> {
    absl::string_view h = absl::StripLeadingAsciiWhitespace(header[i]);
    if (markdown) return Collapse(h);
    if (!absl::StartsWith(h, "//   ")) return std::nullopt;
    return Collapse(h.substr(2));
  };
  size_t best = 0, best_at = 0;
  for (size_t s = 0; s < header.size(); ++s) {
    size_t k = 0;
    while (k < block.lines.size() && s + k < header.size() &&
           example_line(s + k) == block.lines[k]) {
      ++k;
    }
    if (k > best) {
      best = k;
      best_at = s;
    }
    if (best == block.lines.size()) return "";
  }
  const std::string where = absl::StrCat(source_name, ":", block.line + best);
  if (best == 0) {
    return absl::StrCat(block.header, ": the example's first line (", where,
                        ") is in no example line of ", block.header, ": ",
                        block.lines[0]);
  }
  const size_t h = best_at + best;
  return absl::StrCat(block.header, ": the example differs from ", source_name,
                      " at its line ", best + 1, ":\n  ", where, ": ",
                      block.lines[best], "\n  ", block.header, ":", h + 1, ": ",
                      h < header.size() ? header[h] : "(end of file)");
}

TEST(HeaderExamplesSyncTest, HeadersShowTheExamplesRunHere) {
  absl::StatusOr<std::vector<ExampleBlock>> blocks =
      ParseBlocks(ReadRunfile(kThisFile));
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  for (const char* header : kHeaders) {
    int found = 0;
    for (const ExampleBlock& b : *blocks) found += b.header == header;
    EXPECT_GT(found, 0) << header << " has no BEGIN EXAMPLE block in "
                        << kThisFile;
  }
  for (const ExampleBlock& block : *blocks) {
    const std::string text = ReadRunfile(block.header);
    ASSERT_FALSE(text.empty()) << "cannot read " << block.header
                               << " (a data dependency of the test?)";
    const std::string error = CheckBlock(text, block, kThisFile);
    EXPECT_TRUE(error.empty()) << error;
  }
}

// The check itself: a changed line is found and named.
TEST(HeaderExamplesSyncTest, ReportsTheFirstLineThatDiffers) {
  const std::string header =
      "// Foo: an example.\n"
      "//\n"
      "//   int a = 1;\n"
      "//   int b =  a + 1;\n"
      "//   Use(b);\n"
      "#ifndef FOO_H_\n";
  ExampleBlock block{"foo.h", 10, {"int a = 1;", "int b = a + 1;", "Use(b);"}};
  EXPECT_EQ(CheckBlock(header, block, "t.cc"), "");
  block.lines[2] = "Use(a);";
  EXPECT_EQ(CheckBlock(header, block, "t.cc"),
            "foo.h: the example differs from t.cc at its line 3:\n"
            "  t.cc:12: Use(a);\n"
            "  foo.h:5: //   Use(b);");
  block.lines[0] = "int z = 1;";
  EXPECT_NE(
      CheckBlock(header, block, "t.cc").find("first line (t.cc:10) is in no"),
      std::string::npos);
}

TEST(HeaderExamplesSyncTest, ParsesBlocks) {
  const std::string source = absl::StrJoin(
      {"x", "  // BEGIN EXAMPLE a.h", "  f(1,  2);", "  // END EXAMPLE", ""},
      "\n");
  absl::StatusOr<std::vector<ExampleBlock>> blocks = ParseBlocks(source);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].header, "a.h");
  EXPECT_EQ((*blocks)[0].line, 3);
  EXPECT_EQ((*blocks)[0].lines, std::vector<std::string>{"f(1, 2);"});
}

}  // namespace
}  // namespace ipuflow
