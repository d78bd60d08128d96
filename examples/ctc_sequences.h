// Sequence recognition with CTC on the emulated IPUs: a small convolutional
// model reads a strip of 1 to 4 Fashion-MNIST images placed side by side and
// emits, per column of the strip (a time step), a distribution over the 10
// classes plus the CTC blank. It trains with ops::CTCLoss (PyTorch CTCLoss
// interface; Graves et al. 2006) and Adam inside a device loop
// (loops::Repeat) fed by an IPUInfeedQueue made from a DataLoader
// (PopTorch user guide, "Efficient data batching": poptorch.DataLoader), the
// losses streaming back through an IPUOutfeedQueue. Held-out strips, built
// from the test images, are read by a device evaluation loop that outfeeds
// the per-step argmax; the host decodes greedily (best path: collapse
// repeats, drop blanks) and scores the sequences.
//
//   ASSIGN_OR_RETURN(auto system, IPUSystem::Create(IPUConfig()));
//   CtcOptions options;                // 1000 steps of 32 strips, Adam 4e-3
//   ASSIGN_OR_RETURN(CtcReport report,
//                    TrainCtcSequences(system.get(), options));
//   report.sequence_accuracy;           // exact matches of held-out strips
//
// DATA. Images are the real Fashion-MNIST (Debian's dataset-fashion-mnist),
// scaled to [0, 1] and averaged 2x2 to 14x14. A strip is 14 x 64 pixels of
// zeros (background); a sample draws a length L in 1..4, L images from a
// pool (the first `train_images` training images, or the first
// `test_images` test images for the held-out strips), gaps of 0..2 pixels
// between them and a random left offset so that they fit. Its target is the
// L classes as CTC labels 1..10 (label = class + 1; the blank is 0), padded
// with 0 to 4. Everything comes from std::mt19937_64 seeded with `seed`
// (held-out strips with seed + 1), so runs are deterministic.
//
// MODEL (time-major for CTCLoss; T = 32 steps, one per 2 pixel columns):
//   [N,14,64,1] Conv 3x3 SAME 1->16, ReLU, MaxPool 2x2    -> [N,7,32,16]
//               Conv 3x3 SAME 16->32, ReLU, MaxPool 2x1   -> [N,3,32,32]
//               Conv 3x3 SAME 32->32, ReLU                -> [N,3,32,32]
//   per column: [N*32, 3*32] Dense 96->64 ReLU, Dense 64->11, LogSoftmax
//   -> [N,32,11] -> Transpose -> log_probs [32,N,11].
//
// SCORES on the held-out strips: sequence accuracy = the fraction decoded
// exactly; character accuracy = 1 - (sum of Levenshtein distances between
// decoded and true sequences) / (sum of true lengths), at least 0.
// Chance: a sequence guessed without looking is right with probability
// about (1/4) * 1/10^L averaged over L, i.e. under 3%.
//
// RESULTS (deterministic; 1000 held-out strips, the defaults otherwise):
//   ./bazelw run //examples:ctc_sequences -- --steps=1000   (6 s)
//     loss 14.48 -> 0.67, sequence accuracy 48.8%, character accuracy 73.7%
//   ./bazelw run //examples:ctc_sequences -- --steps=4000   (30 s)
//     loss 14.48 -> 0.41, sequence accuracy 61.6%, character accuracy 81.7%
// (a tiny model on 14x14 clothing images, where shirts, pullovers and coats
// are easily confused; a strip counts only when every item is right).
#ifndef IPUFLOW_EXAMPLES_CTC_SEQUENCES_H_
#define IPUFLOW_EXAMPLES_CTC_SEQUENCES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ipu/ipu_system.h"
#include "core/tensor.h"

namespace ipuflow::examples {

inline constexpr int kCtcStripHeight = 14;
inline constexpr int kCtcStripWidth = 64;
inline constexpr int kCtcMaxItems = 4;
inline constexpr int kCtcTimeSteps = 32;
inline constexpr int kCtcClasses = 11;  // Blank (0) and classes 1..10.

struct CtcOptions {
  int64_t steps = 1000;        // Training steps (a multiple of the next).
  int device_iterations = 50;  // Steps per device-loop run.
  int batch_size = 32;
  float learning_rate = 4e-3f;     // Adam.
  int64_t train_sequences = 8000;  // Strips generated for training.
  int64_t eval_sequences = 1000;   // Held-out strips (from test images).
  int eval_batch_size = 50;        // Must divide eval_sequences.
  int64_t train_images = 20000;    // Pool: first N Fashion-MNIST train images.
  int64_t test_images = 5000;      // Pool: first N test images.
  uint64_t seed = 1;               // Data, shuffling and initial weights.
};

// Synthetic strips (see DATA in the file comment).
struct CtcData {
  Tensor strips;          // float32 [M, 14, 64, 1]
  Tensor targets;         // int32 [M, 4]: labels 1..10, padded with 0
  Tensor target_lengths;  // int32 [M]: 1..4
  Tensor input_lengths;   // int32 [M]: all kCtcTimeSteps
};
// `images` float32 [P, 28, 28, 1] in [0, 1], `labels` int32 [P].
CtcData MakeCtcData(const Tensor& images, const Tensor& labels, int64_t count,
                    uint64_t seed);

// Best-path decoding of one sample's per-step argmax: collapse repeats, drop
// the blank (0). Returns labels 1..10.
std::vector<int> GreedyDecode(const int32_t* best, int64_t time_steps);
int64_t EditDistance(const std::vector<int>& a, const std::vector<int>& b);

struct CtcReport {
  int64_t steps = 0;
  std::vector<float> losses;     // Every training step's loss, in order.
  double initial_loss = 0;       // Mean of the first 20 steps' losses.
  double final_loss = 0;         // Mean of the last 20 steps' losses.
  double sequence_accuracy = 0;  // Held-out strips decoded exactly.
  double character_accuracy = 0;
  int64_t eval_sequences = 0;
  double train_seconds = 0;
  // A few held-out strips: "truth -> decoded", classes 0..9.
  std::vector<std::string> samples;
};

// Called from the outfeed's monitoring thread after every step with
// (step, steps, loss of this step).
using CtcStepCallback = std::function<void(int64_t, int64_t, float)>;

// Trains on one IPU of `system` (replica 0) and evaluates.
absl::StatusOr<CtcReport> TrainCtcSequences(
    IPUSystem* system, const CtcOptions& options,
    const CtcStepCallback& on_step = nullptr);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_CTC_SEQUENCES_H_
