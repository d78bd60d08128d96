// The seed's "perf training" example (section 6.1) as a library, so the
// example binary and its test run the same code: a dataset of one 800-float
// tensor mapped to the pair [x, x] and repeated, fed through an infeed into
// a device loop that computes d1 = x1 + x2 and d2 = x1 - x2, counts its
// iterations, and outfeeds {"d1", "d2"}.
#ifndef IPUFLOW_EXAMPLES_PERF_TRAINING_H_
#define IPUFLOW_EXAMPLES_PERF_TRAINING_H_

#include "absl/status/statusor.h"
#include "core/ipu/ipu_system.h"
#include "feeds/outfeed_queue.h"

namespace ipuflow::examples {

struct PerfTrainingResult {
  Tensor counter;                // float32 scalar: iterations run.
  feeds::OutfeedResult outfeed;  // "d1", "d2": [iterations, 800].
};

absl::StatusOr<PerfTrainingResult> RunPerfTraining(IPUSystem* system,
                                                   int iterations = 10);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_PERF_TRAINING_H_
