#include "examples/tutorial_support.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace ipuflow::examples {

absl::StatusOr<TutorialData> LoadTutorialData(int64_t train_limit,
                                              int64_t test_limit) {
  feeds::FashionMnistOptions options;
  options.normalize = true;
  TutorialData data;
  options.limit = train_limit;
  ASSIGN_OR_RETURN(data.train,
                   feeds::LoadFashionMnist(feeds::Split::kTrain, options));
  options.limit = test_limit;
  ASSIGN_OR_RETURN(data.test,
                   feeds::LoadFashionMnist(feeds::Split::kTest, options));
  return data;
}

feeds::DatasetPtr TrainingDataset(const feeds::FashionMnistData& split,
                                  int batch_size, int64_t seed) {
  return feeds::FromTensorSlices({split.images, split.labels})
      ->Shuffle(std::min<int64_t>(split.labels.dim(0), 10000), 42 + seed)
      ->Batch(batch_size, /*drop_remainder=*/true)
      ->Repeat()
      ->Prefetch(8);
}

feeds::DatasetPtr TestDataset(const feeds::FashionMnistData& split,
                              int batch_size) {
  return feeds::FromTensorSlices({split.images, split.labels})
      ->Batch(batch_size, /*drop_remainder=*/true)
      ->Prefetch(8);
}

void DrawProgress(int64_t done, int64_t total, float loss, float accuracy) {
  static const bool tty = isatty(fileno(stderr));
  const int64_t every = std::max<int64_t>(1, total / (tty ? 100 : 10));
  if (done % every != 0 && done != total) return;
  const int width = 30;
  const int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "%s[%.*s%*s] %lld/%lld  loss %.4f  accuracy %.2f%%%s",
               tty ? "\r" : "", filled,
               "==============================", width - filled, "",
               static_cast<long long>(done), static_cast<long long>(total),
               loss, 100 * accuracy, tty ? "" : "\n");
  if (tty && done == total) std::fprintf(stderr, "\n");
}

namespace {

// A step's value averaged over its replicas (a scalar is one replica).
double ReplicaMean(const Tensor& t) {
  const auto v = t.span<float>();
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double Mean(const std::deque<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

}  // namespace

RunningMeans::RunningMeans(int micro_batches, int replicas)
    : replicas_(std::max(1, replicas)),
      window_steps_(std::max(1, micro_batches / replicas_)) {}

void RunningMeans::Add(const Tensor& loss, const Tensor& accuracy) {
  losses_.push_back(ReplicaMean(loss));
  if (accuracy.dtype() != DType::kInvalid) {
    accuracies_.push_back(ReplicaMean(accuracy));
  }
  if (losses_.size() > window_steps_) losses_.pop_front();
  if (accuracies_.size() > window_steps_) accuracies_.pop_front();
}

double RunningMeans::mean_loss() const { return Mean(losses_); }
double RunningMeans::mean_accuracy() const { return Mean(accuracies_); }

OutfeedMonitor::OutfeedMonitor(feeds::IPUOutfeedQueue* outfeed, int64_t steps,
                               int replicas, std::string loss,
                               std::string accuracy, int window,
                               ProgressCallback on_progress)
    : outfeed_(outfeed),
      steps_(steps),
      replicas_(std::max(1, replicas)),
      loss_(std::move(loss)),
      accuracy_(std::move(accuracy)),
      on_progress_(std::move(on_progress)),
      means_(window, replicas),
      thread_([this] { Loop(); }) {}

OutfeedMonitor::~OutfeedMonitor() { Stop(); }

void OutfeedMonitor::Stop() {
  if (!thread_.joinable()) return;
  outfeed_->Close();
  thread_.join();
}

void OutfeedMonitor::Loop() {
  for (int64_t step = 1; step <= steps_; ++step) {
    absl::StatusOr<feeds::OutfeedElement> e = outfeed_->Next();
    if (!e.ok()) return;  // Closed early: the training run failed.
    means_.Add((*e)[loss_], accuracy_.empty() ? Tensor() : (*e)[accuracy_]);
    steps_seen_ = step;
    if (on_progress_) {
      on_progress_(step * replicas_, steps_ * replicas_, means_.last_loss(),
                   means_.mean_accuracy());
    }
  }
}

}  // namespace ipuflow::examples
