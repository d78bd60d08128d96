// End-to-end training on real Fashion-MNIST images (Debian's
// dataset-fashion-mnist): the loss must fall. A small dense network trains
// on the host Session; the tutorial ConvNet trains on an emulated IPU in a
// device loop fed by an infeed, its losses streamed out through an outfeed.
// The memory check refuses that step, in or out of a loop, on a small IPU.
#include <numeric>

#include "core/ipu/ipu_strategy.h"
#include "core/session.h"
#include "examples/models.h"
#include "feeds/fashion_mnist.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/control/loops.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adam.h"
#include "optimizers/adamw.h"

namespace ipuflow {
namespace {

double Mean(const std::vector<float>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, 0.0) /
         (end - begin);
}

TEST(FashionMnistTrainingTest, MlpLossFallsOnTheHost) {
  feeds::FashionMnistOptions options;
  options.limit = 512;
  auto data = feeds::LoadFashionMnist(feeds::Split::kTrain, options);
  ASSERT_TRUE(data.ok()) << data.status();
  Scope s = Scope::NewRootScope();
  Output images = ops::Placeholder(s, DType::kFloat32, {32, 28, 28, 1});
  Output labels = ops::Placeholder(s, DType::kInt32, {32});
  Output logits = models::Mlp(s, models::CreateMlpParams(s), images);
  Output loss = ops::SoftmaxCrossEntropyLoss(s, logits, labels);
  optimizers::AdamOptimizer adam(1e-3f);
  Node* train = adam.Minimize(s, loss);
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<float> losses;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int b = 0; b < 16; ++b) {
      std::vector<Tensor> out;
      ASSERT_TRUE(session
                      .Run({{images, data->images.Slice(32 * b, 32 * b + 32)},
                            {labels, data->labels.Slice(32 * b, 32 * b + 32)}},
                           {loss}, {train}, &out)
                      .ok());
      losses.push_back(out[0].scalar<float>());
    }
  }
  EXPECT_GT(Mean(losses, 0, 5), 1.5);  // ~ln(10) at the start.
  EXPECT_LT(Mean(losses, losses.size() - 5, losses.size()),
            0.6 * Mean(losses, 0, 5));
}

TEST(FashionMnistTrainingTest, ConvNetLossFallsInADeviceLoop) {
  feeds::FashionMnistOptions options;
  options.limit = 640;
  feeds::DatasetPtr ds = feeds::FashionMnist(feeds::Split::kTrain, options)
                             ->Shuffle(640, 1)
                             ->Batch(32, /*drop_remainder=*/true)
                             ->Repeat();
  auto infeed = feeds::IPUInfeedQueue::Create(ds);
  auto outfeed = feeds::IPUOutfeedQueue::Create();
  ASSERT_TRUE(infeed.ok() && outfeed.ok()) << infeed.status();
  Scope s = Scope::NewRootScope();
  optimizers::AdamOptimizer adam(2e-3f);
  models::ConvNetParams params = models::CreateConvNetParams(s);
  auto loop = loops::Repeat(
      s, 20,
      [&](const Scope& b, const std::vector<Output>& a) {
        Output logits = models::ConvNet(b, params, a[0]);
        Output loss = ops::SoftmaxCrossEntropyLoss(b, logits, a[1]);
        adam.Minimize(b, loss);
        (*outfeed)->Enqueue(b, {{"loss", loss}});
        return std::vector<Output>{};
      },
      {}, infeed->get());
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto system = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(system.ok());
  IPUStrategy strategy(system->get());
  ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
  for (int run = 0; run < 4; ++run) {
    ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
  }
  EXPECT_EQ(strategy.num_compiles(), 2);  // Initialisers + the training loop.
  auto result = (*outfeed)->Dequeue();
  ASSERT_TRUE(result.ok()) << result.status();
  const Tensor& l = (*result)["loss"];
  ASSERT_EQ(l.shape(), TensorShape({80}));
  std::vector<float> losses = l.ToVector<float>();
  EXPECT_GT(Mean(losses, 0, 5), 1.5);
  EXPECT_LT(Mean(losses, 70, 80), 0.6 * Mean(losses, 0, 5));
}

// The "IPU 0 (shard 0): <total> of" figure of an out-of-memory report.
std::string ReportedTotal(const absl::Status& st) {
  const std::string m(st.message());
  const size_t begin = m.find("(shard 0): ");
  if (begin == std::string::npos) return "";
  const size_t end = m.find(" of ", begin);
  return m.substr(begin + 11, end - begin - 11);
}

// The tutorial ConvNet's AdamW step on a batch of 32, in or out of a device
// loop; images and labels are fed placeholders.
struct AdamWStep {
  Scope scope = Scope::NewRootScope();
  Output images, labels, loss;
  Node* train = nullptr;
  FeedList feeds;
};

std::unique_ptr<AdamWStep> BuildAdamWStep(bool in_loop) {
  auto step = std::make_unique<AdamWStep>();
  Scope& s = step->scope;
  step->images = ops::Placeholder(s, DType::kFloat32, {32, 28, 28, 1});
  step->labels = ops::Placeholder(s, DType::kInt32, {32});
  step->feeds = {
      {step->images, Tensor::Filled(DType::kFloat32, {32, 28, 28, 1}, 0.0)},
      {step->labels, Tensor::Filled(DType::kInt32, {32}, 0.0)}};
  models::ConvNetParams params = models::CreateConvNetParams(s);
  optimizers::AdamWOptimizer adamw(1e-3f);
  auto body = [&](const Scope& b) {
    step->loss = ops::SoftmaxCrossEntropyLoss(
        b, models::ConvNet(b, params, step->images), step->labels);
    return adamw.Minimize(b, step->loss);
  };
  if (!in_loop) {
    step->train = body(s);
  } else {
    auto loop =
        loops::Repeat(s, 10, [&](const Scope& b, const std::vector<Output>&) {
          body(b);
          return std::vector<Output>{};
        });
    EXPECT_TRUE(loop.ok()) << loop.status();
    step->train = loop->op;
  }
  EXPECT_TRUE(s.ok()) << s.status();
  return step;
}

TEST(FashionMnistTrainingTest, ConvNetAdamWStepInALoopIsRefusedLikeTheStep) {
  IPUConfig config;  // 2 MiB per IPU: the step needs about 3.1 MiB.
  config.set_tiles_per_ipu(4);
  config.set_memory_per_tile(512 * 1024);
  auto system = IPUSystem::Create(config);
  ASSERT_TRUE(system.ok()) << system.status();
  IPUStrategy strategy(system->get());

  auto step = BuildAdamWStep(/*in_loop=*/false);
  absl::Status st = strategy
                        .Compile(*step->scope.graph(), {step->loss},
                                 {step->train}, step->feeds)
                        .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  const std::string step_total = ReportedTotal(st);

  // In a loop the slots (built in the body) and the step's intermediates
  // are the loop body's.
  auto looped = BuildAdamWStep(/*in_loop=*/true);
  st = strategy
           .Compile(*looped->scope.graph(), {}, {looped->train}, looped->feeds)
           .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("loop bodies:"), std::string::npos) << st;
  EXPECT_NE(st.message().find("(largest: 'Repeat')"), std::string::npos) << st;
  EXPECT_NE(st.message().find("/AdamW/m'"), std::string::npos) << st;
  EXPECT_EQ(ReportedTotal(st), step_total) << st;  // 3.13 MiB both.

  // The default IPU holds it.
  auto big = IPUSystem::Create(IPUConfig());
  ASSERT_TRUE(big.ok());
  IPUStrategy big_strategy(big->get());
  auto program = big_strategy.Compile(*looped->scope.graph(), {},
                                      {looped->train}, looped->feeds);
  ASSERT_TRUE(program.ok()) << program.status();
  const MemoryPlan& m = (*program)->program(0).memory();
  EXPECT_GT(m.loop_body_peak_bytes, 0);
  EXPECT_GT(m.loop_body_always_live_bytes, 0);
}

}  // namespace
}  // namespace ipuflow
