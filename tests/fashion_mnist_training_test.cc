// End-to-end training on real Fashion-MNIST images (Debian's
// dataset-fashion-mnist): the loss must fall. A small dense network trains
// on the host Session; the tutorial ConvNet trains on an emulated IPU in a
// device loop fed by an infeed, its losses streamed out through an outfeed.
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

namespace ipuflow {
namespace {

double Mean(const std::vector<float>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + begin, v.begin() + end, 0.0) / (end - begin);
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
      ASSERT_TRUE(session.Run({{images, data->images.Slice(32 * b, 32 * b + 32)},
                               {labels, data->labels.Slice(32 * b, 32 * b + 32)}},
                              {loss}, {train}, &out).ok());
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
  auto loop = loops::Repeat(s, 20, [&](const Scope& b, const std::vector<Output>& a) {
    Output logits = models::ConvNet(b, params, a[0]);
    Output loss = ops::SoftmaxCrossEntropyLoss(b, logits, a[1]);
    adam.Minimize(b, loss);
    (*outfeed)->Enqueue(b, {{"loss", loss}});
    return std::vector<Output>{};
  }, {}, infeed->get());
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

}  // namespace
}  // namespace ipuflow
