// What the two Fashion-MNIST trainers (train_fashion_mnist, pipelined, and
// train_fashion_mnist_loop, a device loop) share, in one place: the data,
// the monitoring thread that reads the training outfeed, and the progress
// bar it draws.
//
//   ASSIGN_OR_RETURN(TutorialData data, LoadTutorialData(-1, -1));
//   ASSIGN_OR_RETURN(auto infeed, feeds::IPUInfeedQueue::Create(
//       TrainingDataset(data.train, /*batch_size=*/40, /*seed=*/0)));
//   OutfeedMonitor monitor(outfeed.get(), steps, replicas, "loss",
//                          "accuracy", /*window=*/50, DrawProgress);
//   ... run the device ...
//   monitor.Stop();               // closes the outfeed, joins the thread
//   monitor.mean_loss();          // over the last `window` micro-batches
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_SUPPORT_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_SUPPORT_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "feeds/dataset.h"
#include "feeds/fashion_mnist.h"
#include "feeds/outfeed_queue.h"

namespace ipuflow::examples {

// Fashion-MNIST from Debian's dataset-fashion-mnist, normalised as the
// PopTorch tutorials do (Normalize((0.5,), (0.5,)): pixels in [-1, 1]).
struct TutorialData {
  feeds::FashionMnistData train;  // images float32 [N, 28, 28, 1], labels [N]
  feeds::FashionMnistData test;
};
// The first `train_limit` / `test_limit` images of each split (-1: all).
absl::StatusOr<TutorialData> LoadTutorialData(int64_t train_limit,
                                              int64_t test_limit);

// As poptorch.DataLoader(shuffle=True, drop_last=True), forever: shuffled
// (buffer 10000, seed 42 + `seed`), batches of `batch_size`, repeated. With
// R replicas the infeed hands element i to replica i % R.
feeds::DatasetPtr TrainingDataset(const feeds::FashionMnistData& split,
                                  int batch_size, int64_t seed);
// The test split once, in order, in batches of `batch_size` (drop_last).
feeds::DatasetPtr TestDataset(const feeds::FashionMnistData& split,
                              int batch_size);

// Wall seconds since `start` (the examples' images/s).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// Called with (micro-batches done, total, loss, running accuracy).
using ProgressCallback = std::function<void(int64_t, int64_t, float, float)>;

// Draws "[=====     ] done/total  loss L  accuracy A%" on stderr: redrawn
// in place on a terminal (100 times per run), a line every 10% elsewhere
// (logs, CI).
void DrawProgress(int64_t done, int64_t total, float loss, float accuracy);

// The last `micro_batches` micro-batches' loss and accuracy, in whole steps
// (at least one): a step holds one micro-batch per replica (scalars for one
// replica, [R] tensors for R), averaged over the replicas. Filled by one
// thread; read by another once that one is done (joined).
class RunningMeans {
 public:
  RunningMeans(int micro_batches, int replicas);
  // One step; an invalid `accuracy` tensor (Tensor()) adds no accuracy.
  void Add(const Tensor& loss, const Tensor& accuracy);
  // The window, in micro-batches: whole steps x replicas.
  int micro_batches() const {
    return static_cast<int>(window_steps_) * replicas_;
  }
  double last_loss() const { return losses_.empty() ? 0 : losses_.back(); }
  double mean_loss() const;
  double mean_accuracy() const;

 private:
  const int replicas_;
  const size_t window_steps_;
  std::deque<double> losses_, accuracies_;  // Replica means, last window.
};

// The monitoring thread: takes `steps` steps from a training outfeed as the
// device produces them (IPUOutfeedQueue::Next). A step holds one micro-batch
// per replica: scalars for one replica, [R] tensors for R; loss and accuracy
// are averaged over the replicas. Keeps the last `window` micro-batches (at
// least one step) for mean_loss / mean_accuracy and calls `on_progress`
// after every step (on the monitor's thread).
class OutfeedMonitor {
 public:
  // `accuracy` may be empty (no accuracy in the outfeed). The outfeed must
  // outlive the monitor.
  OutfeedMonitor(feeds::IPUOutfeedQueue* outfeed, int64_t steps, int replicas,
                 std::string loss, std::string accuracy, int window,
                 ProgressCallback on_progress = nullptr);
  ~OutfeedMonitor();  // Stop().
  OutfeedMonitor(const OutfeedMonitor&) = delete;
  OutfeedMonitor& operator=(const OutfeedMonitor&) = delete;

  // No more steps will come (the outfeed is closed: a failed run ends the
  // monitor early); waits for the thread. The getters are valid after it.
  void Stop();
  int64_t steps_seen() const { return steps_seen_; }
  int window_micro_batches() const { return means_.micro_batches(); }
  double mean_loss() const { return means_.mean_loss(); }
  double mean_accuracy() const { return means_.mean_accuracy(); }

 private:
  void Loop();

  feeds::IPUOutfeedQueue* const outfeed_;
  const int64_t steps_;
  const int replicas_;
  const std::string loss_, accuracy_;
  const ProgressCallback on_progress_;
  int64_t steps_seen_ = 0;
  RunningMeans means_;
  std::thread thread_;
};

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_SUPPORT_H_
