#include "examples/fashion_mnist_training.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "examples/models.h"
#include "examples/tutorial_support.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/control/loops.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"
#include "optimizers/cross_replica.h"

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
  // One replica per IPU: each step trains one batch on every replica.
  const int replicas = system->num_ipus();
  const int64_t n_train = data.train.labels.dim(0);
  const int64_t n_test = data.test.labels.dim(0);
  const int64_t steps_per_epoch =
      n_train / (static_cast<int64_t>(options.batch_size) * replicas);
  const int64_t runs = std::max<int64_t>(
      1, options.epochs * steps_per_epoch / options.device_iterations);
  const int64_t steps = runs * options.device_iterations;
  const int64_t test_steps =
      n_test / (static_cast<int64_t>(options.test_batch_size) * replicas);
  if (test_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--test-batch-size ", options.test_batch_size, " x ", replicas,
        " replica(s) exceeds the ", n_test, " test images"));
  }

  // Feeds: shuffled, batched training data forever; test data in order.
  ASSIGN_OR_RETURN(auto train_feed,
                   feeds::IPUInfeedQueue::Create(
                       TrainingDataset(data.train, options.batch_size, 0)));
  ASSIGN_OR_RETURN(auto test_feed, feeds::IPUInfeedQueue::Create(TestDataset(
                                       data.test, options.test_batch_size)));
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
  // Replicas average their gradients before AdamW so they stay in step
  // (the identity on one IPU).
  optimizers::AdamWOptimizer adamw(options.learning_rate);
  optimizers::CrossReplicaOptimizer optimizer(&adamw);
  ASSIGN_OR_RETURN(
      loops::Loop train_loop,
      loops::Repeat(
          root.NewSubScope("train"), options.device_iterations,
          [&](const Scope& s, const std::vector<Output>& batch) {
            Output logits = model.Logits(s, batch[0]);
            Output loss = ops::SoftmaxCrossEntropyLoss(s, logits, batch[1]);
            optimizer.Minimize(s, loss);
            train_out->Enqueue(
                s, {{"loss", loss},
                    {"accuracy", models::Accuracy(s, logits, batch[1])}});
            return std::vector<Output>{};
          },
          {}, train_feed.get()));
  ASSIGN_OR_RETURN(
      loops::Loop test_loop,
      loops::Repeat(
          root.NewSubScope("test"), test_steps,
          [&](const Scope& s, const std::vector<Output>& batch) {
            Output logits = model.Logits(s, batch[0]);
            test_out->Enqueue(
                s, {{"accuracy", models::Accuracy(s, logits, batch[1])}});
            return std::vector<Output>{};
          },
          {}, test_feed.get()));
  RETURN_IF_ERROR(root.status());

  // A monitoring thread sees every step's loss as it arrives.
  OutfeedMonitor monitor(train_out.get(), steps, replicas, "loss", "accuracy",
                         /*window=*/50,
                         [&](int64_t done, int64_t, float loss, float acc) {
                           if (on_step)
                             on_step(done / replicas, steps, loss, acc);
                         });
  IPUStrategy strategy(system);
  absl::Status status = strategy.Initialize(*root.graph());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    status = strategy.Run(*root.graph(), {}, {train_loop.op}).status();
  }
  const auto end = std::chrono::steady_clock::now();
  monitor.Stop();
  RETURN_IF_ERROR(status);

  TrainingReport report;
  report.steps = steps;
  report.train_seconds = std::chrono::duration<double>(end - start).count();
  report.train_images_per_second =
      steps * replicas * options.batch_size / report.train_seconds;
  report.final_loss = monitor.mean_loss();
  report.train_accuracy = monitor.mean_accuracy();

  RETURN_IF_ERROR(strategy.Run(*root.graph(), {}, {test_loop.op}).status());
  ASSIGN_OR_RETURN(feeds::OutfeedResult accuracies, test_out->Dequeue());
  const Tensor& acc = accuracies["accuracy"];
  double sum = 0;
  for (float a : acc.span<float>()) sum += a;
  report.test_accuracy = sum / acc.NumElements();
  return report;
}

}  // namespace ipuflow::examples
