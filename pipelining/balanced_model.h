// A model whose pipeline stages all cost the same: each stage is `layers`
// dense layers of `width` units with tanh, trained by SGD on the mean square
// of the last stage's output. What pipeline_benchmark measures and the
// timing tests check the virtual clocks and the planner against.
//
//   for (int s = 0; s < 4; ++s) {
//     o.computational_stages.push_back(DenseTanhStage(s, 256, 2));
//   }
//   o.optimizer_function = MeanSquareSgd(0.01f);
#ifndef IPUFLOW_PIPELINING_BALANCED_MODEL_H_
#define IPUFLOW_PIPELINING_BALANCED_MODEL_H_

#include "pipelining/pipeline.h"

namespace ipuflow::pipelining {

// (x [batch, width]) -> (y [batch, width]); creates variables "w0".. in the
// stage's scope, Glorot-uniform with seeds derived from `stage`.
StageFunction DenseTanhStage(int stage, int width, int layers);

// SGD(learning_rate) on mean(y^2) of the last stage's first output.
OptimizerFunction MeanSquareSgd(float learning_rate);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_BALANCED_MODEL_H_
