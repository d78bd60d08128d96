#include "examples/fashion_mnist_training.h"

#include <chrono>
#include <deque>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "examples/models.h"
#include "examples/tutorial_data.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/control/loops.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"

namespace ipuflow::examples {
namespace {

// The model's logits, whichever model was chosen.
struct Model {
  std::string kind;
  models::ConvNetParams conv;
  models::MlpParams mlp;
  Output Logits(const Scope& s, Output images) const {
    return kind == "mlp" ? models::Mlp(s, mlp, images)
                         : models::ConvNet(s, conv, images);
  }
};

absl::Status Validate(const TrainingOptions& o) {
  if (o.model != "conv" && o.model != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model must be conv or mlp, got '", o.model, "'"));
  }
  if (o.batch_size < 1 || o.device_iterations < 1 || o.test_batch_size < 1 ||
      o.epochs < 1) {
    return absl::InvalidArgumentError(
        "--batch-size, --device-iterations, --test-batch-size and --epochs "
        "must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingReport> TrainFashionMnist(IPUSystem* system,
                                                 const TrainingOptions& options,
                                                 const StepCallback& on_step) {
  RETURN_IF_ERROR(Validate(options));
  ASSIGN_OR_RETURN(TutorialData data,
                   LoadTutorialData(options.train_limit, options.test_limit));
  const feeds::FashionMnistData& train = data.train;
  const feeds::FashionMnistData& test = data.test;
  const int64_t n_train = train.labels.dim(0), n_test = test.labels.dim(0);
  const int64_t steps_per_epoch = n_train / options.batch_size;
  const int64_t runs = std::max<int64_t>(
      1, options.epochs * steps_per_epoch / options.device_iterations);
  const int64_t steps = runs * options.device_iterations;
  if (n_test < options.test_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--test-batch-size ", options.test_batch_size, " exceeds the ",
        n_test, " test images"));
  }

  // Feeds: shuffled, batched training data forever; test data in order.
  ASSIGN_OR_RETURN(
      auto train_feed,
      feeds::IPUInfeedQueue::Create(
          feeds::FromTensorSlices({train.images, train.labels})
              ->Shuffle(std::min<int64_t>(n_train, 10000), /*seed=*/42)
              ->Batch(options.batch_size, /*drop_remainder=*/true)
              ->Repeat()
              ->Prefetch(4)));
  ASSIGN_OR_RETURN(auto test_feed,
                   feeds::IPUInfeedQueue::Create(
                       feeds::FromTensorSlices({test.images, test.labels})
                           ->Batch(options.test_batch_size, true)));
  ASSIGN_OR_RETURN(auto train_out, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(auto test_out, feeds::IPUOutfeedQueue::Create());

  // The graph: variables, a training loop and an evaluation loop.
  Scope root = Scope::NewRootScope();
  Model model{options.model};
  if (model.kind == "mlp") {
    model.mlp = models::CreateMlpParams(root.NewSubScope("mlp"));
  } else {
    model.conv = models::CreateConvNetParams(root.NewSubScope("convnet"));
  }
  optimizers::AdamWOptimizer adamw(options.learning_rate);
  ASSIGN_OR_RETURN(
      loops::Loop train_loop,
      loops::Repeat(root.NewSubScope("train"), options.device_iterations,
                    [&](const Scope& s, const std::vector<Output>& batch) {
                      Output logits = model.Logits(s, batch[0]);
                      Output loss = ops::SoftmaxCrossEntropyLoss(s, logits, batch[1]);
                      adamw.Minimize(s, loss);
                      train_out->Enqueue(
                          s, {{"loss", loss},
                              {"accuracy", models::Accuracy(s, logits, batch[1])}});
                      return std::vector<Output>{};
                    },
                    {}, train_feed.get()));
  const int64_t test_steps = n_test / options.test_batch_size;
  ASSIGN_OR_RETURN(
      loops::Loop test_loop,
      loops::Repeat(root.NewSubScope("test"), test_steps,
                    [&](const Scope& s, const std::vector<Output>& batch) {
                      Output logits = model.Logits(s, batch[0]);
                      test_out->Enqueue(
                          s, {{"accuracy", models::Accuracy(s, logits, batch[1])}});
                      return std::vector<Output>{};
                    },
                    {}, test_feed.get()));
  RETURN_IF_ERROR(root.status());

  // A monitoring thread sees every step's loss as it arrives.
  TrainingReport report;
  std::deque<float> last_losses, last_accuracies;
  std::thread monitor([&] {
    for (int64_t step = 1; step <= steps; ++step) {
      absl::StatusOr<feeds::OutfeedElement> e = train_out->Next();
      if (!e.ok()) return;  // Closed early (an error in the training run).
      const float loss = (*e)["loss"].scalar<float>();
      const float acc = (*e)["accuracy"].scalar<float>();
      last_losses.push_back(loss);
      last_accuracies.push_back(acc);
      if (last_losses.size() > 50) {
        last_losses.pop_front();
        last_accuracies.pop_front();
      }
      const float running_acc =
          std::accumulate(last_accuracies.begin(), last_accuracies.end(), 0.0f) /
          last_accuracies.size();
      if (on_step) on_step(step, steps, loss, running_acc);
    }
  });

  IPUStrategy strategy(system);
  absl::Status status = strategy.Initialize(*root.graph());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    status = strategy.Run(*root.graph(), {}, {train_loop.op}).status();
  }
  const auto end = std::chrono::steady_clock::now();
  train_out->Close();
  monitor.join();
  RETURN_IF_ERROR(status);

  report.steps = steps;
  report.train_seconds = std::chrono::duration<double>(end - start).count();
  report.train_images_per_second =
      steps * options.batch_size / report.train_seconds;
  report.final_loss =
      std::accumulate(last_losses.begin(), last_losses.end(), 0.0) / last_losses.size();
  report.train_accuracy =
      std::accumulate(last_accuracies.begin(), last_accuracies.end(), 0.0) /
      last_accuracies.size();

  RETURN_IF_ERROR(strategy.Run(*root.graph(), {}, {test_loop.op}).status());
  ASSIGN_OR_RETURN(feeds::OutfeedResult accuracies, test_out->Dequeue());
  const Tensor& acc = accuracies["accuracy"];
  double sum = 0;
  for (int64_t i = 0; i < acc.NumElements(); ++i) sum += acc.data<float>()[i];
  report.test_accuracy = sum / acc.NumElements();
  return report;
}

}  // namespace ipuflow::examples
