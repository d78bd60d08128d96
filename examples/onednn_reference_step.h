// OnednnConvNetStep: the tutorial ConvNet's training step (models::ConvNet:
// conv 5x5 1->10, max-pool 2, ReLU, conv 5x5 10->20, max-pool 2, ReLU,
// dense 320->256 + ReLU, dense 256->10, mean softmax cross-entropy, AdamW)
// written against oneDNN 2.6 alone: the reference issue 12 asks ipuflow's
// step to beat. Convolutions, pooling, ReLU and the dense layers are oneDNN
// primitives (created once, in the constructor; bias and ReLU fused where
// oneDNN fuses them); the loss, bias gradients of the dense layers and the
// AdamW update are plain loops (oneDNN has no primitive for them).
//
//   omp_set_num_threads(2);          // oneDNN's own OpenMP threads.
//   OnednnConvNetStep step(/*batch=*/40);
//   float loss = step.Step(images, labels);  // Forward, backward, update.
//
// Activations are NHWC as in ipuflow (so fc1 reads the pooled activations
// in ipuflow's flattening order); filters are kept HWIO and reordered to
// the layout each primitive chooses, every step, as a oneDNN program that
// owns its weights in a framework's layout does.
//
// Thread safety: one thread at a time. oneDNN runs each primitive on the
// OpenMP thread count of the thread that constructed the object.
#ifndef IPUFLOW_EXAMPLES_ONEDNN_REFERENCE_STEP_H_
#define IPUFLOW_EXAMPLES_ONEDNN_REFERENCE_STEP_H_

#include <cstdint>
#include <memory>

namespace ipuflow::examples {

class OnednnConvNetStep {
 public:
  // Glorot-uniform weights and zero biases drawn from `seed`; AdamW with
  // PyTorch's defaults (weight decay 0.01) and learning rate `lr`.
  explicit OnednnConvNetStep(int64_t batch = 40, uint32_t seed = 1,
                             float lr = 1e-3f);
  ~OnednnConvNetStep();
  OnednnConvNetStep(const OnednnConvNetStep&) = delete;
  OnednnConvNetStep& operator=(const OnednnConvNetStep&) = delete;

  // The mean loss of `images` ([batch, 28, 28, 1] NHWC) against `labels`
  // (batch values in [0, 10)), forward only.
  float Forward(const float* images, const int32_t* labels);

  // Forward, backward and one AdamW update; returns the loss before it.
  float Step(const float* images, const int32_t* labels);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_ONEDNN_REFERENCE_STEP_H_
