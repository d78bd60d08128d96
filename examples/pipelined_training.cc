#include "examples/pipelined_training.h"

#include <chrono>
#include <deque>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_strategy.h"
#include "examples/models.h"
#include "examples/tutorial_data.h"
#include "feeds/infeed_queue.h"
#include "feeds/outfeed_queue.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "optimizers/adamw.h"
#include "pipelining/execution_strategy.h"
#include "pipelining/pipeline.h"

namespace ipuflow::examples {
namespace {

constexpr int kBlocks = 4;

absl::Status Validate(const PipelinedTrainingOptions& o) {
  if (o.strategy != "pipelined" && o.strategy != "sharded") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--strategy must be pipelined or sharded, got '", o.strategy, "'"));
  }
  if (o.batch_size < 1 || o.device_iterations < 1 ||
      o.gradient_accumulation < 1 || o.test_batch_size < 1 ||
      o.test_device_iterations < 1 || o.epochs < 1) {
    return absl::InvalidArgumentError(
        "--batch-size, --device-iterations, --gradient-accumulation, "
        "--test-batch-size, --test-device-iterations and --epochs must be "
        "positive");
  }
  return absl::OkStatus();
}

// The ConvNet as PopTorch blocks B1-B4, block b on IPU b - 1 (as
// poptorch.BeginBlock(layer, "B1", ipu_id=0)): (x, labels) -> (y, labels);
// the last block computes what the pipeline hands on: loss and accuracy
// when training, accuracy when evaluating.
absl::StatusOr<pipelining::BlockModel> ConvNetBlocks(
    const models::ConvNetParams& params, bool training) {
  pipelining::BlockModel model;
  for (int b = 0; b < kBlocks; ++b) {
    RETURN_IF_ERROR(model.Add(
        absl::StrCat("B", b + 1),
        [&params, b, training](const Scope& s, const std::vector<Output>& a) {
          Output y = models::ConvNetBlock(s, params, b, a[0]);
          if (b + 1 < kBlocks) return std::vector<Output>{y, a[1]};
          Output accuracy = models::Accuracy(s, y, a[1]);
          if (!training) return std::vector<Output>{accuracy};
          return std::vector<Output>{ops::SoftmaxCrossEntropyLoss(s, y, a[1]),
                                     accuracy};
        },
        /*ipu_id=*/b));
  }
  return model;
}

// The blocks staged by IPU (AutoStage::kSameAsIpu) under the chosen
// strategy: PipelinedExecution or ShardedExecution.
absl::StatusOr<pipelining::PipelineOptions> StagedOptions(
    const PipelinedTrainingOptions& o, const models::ConvNetParams& params,
    bool training) {
  ASSIGN_OR_RETURN(pipelining::BlockModel model, ConvNetBlocks(params, training));
  const auto auto_stage = pipelining::AutoStage::kSameAsIpu;
  pipelining::PipelineOptions p;
  RETURN_IF_ERROR(pipelining::ApplyStrategy(
      model,
      o.strategy == "sharded" ? pipelining::ShardedExecution(auto_stage)
                              : pipelining::PipelinedExecution(auto_stage),
      &p));
  return p;
}

double Mean(const std::deque<float>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

}  // namespace

absl::StatusOr<PipelinedTrainingReport> TrainPipelinedFashionMnist(
    IPUSystem* system, const PipelinedTrainingOptions& o,
    const ProgressCallback& on_progress) {
  RETURN_IF_ERROR(Validate(o));
  if (system->num_ipus() < kBlocks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pipelined ConvNet needs ", kBlocks, " IPUs; the system has ",
        system->num_ipus()));
  }
  ASSIGN_OR_RETURN(TutorialData data,
                   LoadTutorialData(o.train_limit, o.test_limit));
  const feeds::FashionMnistData& train = data.train;
  const feeds::FashionMnistData& test = data.test;
  const int64_t per_call = static_cast<int64_t>(o.device_iterations) *
                           o.gradient_accumulation;
  const int64_t runs =
      o.epochs * train.labels.dim(0) / (per_call * o.batch_size);
  const int64_t test_runs =
      test.labels.dim(0) /
      (static_cast<int64_t>(o.test_device_iterations) * o.test_batch_size);
  if (runs < 1 || test_runs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "one host call needs ", per_call * o.batch_size,
        " training images (batch size x device iterations x gradient "
        "accumulation) and ", o.test_device_iterations * o.test_batch_size,
        " test images; there are ", train.labels.dim(0), " and ",
        test.labels.dim(0)));
  }

  ASSIGN_OR_RETURN(
      auto train_feed,
      feeds::IPUInfeedQueue::Create(
          feeds::FromTensorSlices({train.images, train.labels})
              ->Shuffle(std::min<int64_t>(train.labels.dim(0), 10000),
                        42 + o.seed)
              ->Batch(o.batch_size, /*drop_remainder=*/true)
              ->Repeat()
              ->Prefetch(8)));
  ASSIGN_OR_RETURN(auto test_feed,
                   feeds::IPUInfeedQueue::Create(
                       feeds::FromTensorSlices({test.images, test.labels})
                           ->Batch(o.test_batch_size, true)
                           ->Prefetch(8)));
  ASSIGN_OR_RETURN(auto train_out, feeds::IPUOutfeedQueue::Create());
  ASSIGN_OR_RETURN(auto test_out, feeds::IPUOutfeedQueue::Create());

  // Block b's variables live on IPU b; both pipelines read them.
  Scope root = Scope::NewRootScope();
  std::vector<Scope> block_scopes;
  for (int b = 0; b < kBlocks; ++b) block_scopes.push_back(root.WithIpu(b));
  const models::ConvNetParams params =
      models::CreateConvNetParams(root.NewSubScope("convnet"), block_scopes,
                                  o.seed);

  ASSIGN_OR_RETURN(pipelining::PipelineOptions t,
                   StagedOptions(o, params, /*training=*/true));
  t.name = "train";
  t.gradient_accumulation_count = o.gradient_accumulation;
  t.repeat_count = o.device_iterations;
  t.infeed_queue = train_feed.get();
  t.outfeed_queue = train_out.get();
  t.reduction_method = pipelining::ReductionMethod::kMean;
  t.offload_weight_update_variables = o.offload_optimiser;
  const float lr = o.learning_rate;
  t.optimizer_function = [lr](const Scope&, const std::vector<Output>& out) {
    return pipelining::OptimizerFunctionOutput{
        std::make_shared<optimizers::AdamWOptimizer>(lr), out[0]};
  };
  ASSIGN_OR_RETURN(auto training, pipelining::Pipeline(root, std::move(t)));

  ASSIGN_OR_RETURN(pipelining::PipelineOptions e,
                   StagedOptions(o, params, /*training=*/false));
  e.name = "inference";
  e.gradient_accumulation_count = o.test_device_iterations;
  e.infeed_queue = test_feed.get();
  e.outfeed_queue = test_out.get();
  ASSIGN_OR_RETURN(auto inference, pipelining::Pipeline(root, std::move(e)));

  // The monitoring thread sees each micro-batch's loss as it arrives.
  const int64_t total = runs * per_call;
  std::deque<float> losses, accuracies;
  std::thread monitor([&] {
    for (int64_t i = 1; i <= total; ++i) {
      absl::StatusOr<feeds::OutfeedElement> el = train_out->Next();
      if (!el.ok()) return;  // Closed early: a training error.
      losses.push_back((*el)["0"].scalar<float>());
      accuracies.push_back((*el)["1"].scalar<float>());
      if (losses.size() > 50) {
        losses.pop_front();
        accuracies.pop_front();
      }
      if (on_progress) on_progress(i, total, losses.back(), Mean(accuracies));
    }
  });

  PipelinedTrainingReport report;
  absl::Status status = IPUStrategy(system).Initialize(*root.graph());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < runs && status.ok(); ++r) {
    absl::StatusOr<pipelining::PipelineReport> run = training->Run(system);
    if (run.ok()) {
      report.last_run = std::move(*run);
    } else {
      status = run.status();
    }
  }
  report.train_seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start).count();
  train_out->Close();
  monitor.join();
  RETURN_IF_ERROR(status);
  report.memory_report = training->MemoryReport();
  report.micro_batches = total;
  report.weight_updates = runs * o.device_iterations;
  report.train_images_per_second =
      total * o.batch_size / report.train_seconds;
  report.final_loss = Mean(losses);
  report.train_accuracy = Mean(accuracies);

  const auto test_start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < test_runs; ++r) {
    ASSIGN_OR_RETURN(report.test_run, inference->Run(system));
  }
  const double test_seconds = std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - test_start)
                                  .count();
  ASSIGN_OR_RETURN(feeds::OutfeedResult results, test_out->Dequeue());
  const Tensor& acc = results["0"];
  double sum = 0;
  for (float a : acc.span<float>()) sum += a;
  report.test_accuracy = sum / acc.NumElements();
  report.test_images = acc.NumElements() * o.test_batch_size;
  report.test_images_per_second = report.test_images / test_seconds;
  return report;
}

}  // namespace ipuflow::examples
