// Pre-flight validation of a pipeline configuration: every rule Graphcore's
// TensorFlow port enforces on (schedule, stages, device_mapping,
// gradient_accumulation_count, training), checked before any graph is built,
// with ALL violations reported at once, each naming the values and a valid
// nearby setting.
//
//   absl::Status s = ValidatePipeline(PipelineSchedule::kGrouped,
//                                     /*num_stages=*/4, /*device_mapping=*/{},
//                                     /*gradient_accumulation_count=*/3,
//                                     /*training=*/true);
//   // InvalidArgument: "Invalid pipeline (Grouped training, 4 stages, ...):
//   //   gradient_accumulation_count 3 is smaller than the 4 stages (Grouped
//   //   training): ... use at least 4 (8, a multiple of the overlap length,
//   //   also runs on Graphcore's port)"
//
// The rules (N = number of stages, L = overlap length):
//  1. N >= 2 ("Pipeline requires at least two computational stages.",
//     pipelining_ops.py). MakeSchedule itself accepts N = 1.
//  2. device_mapping is empty (identity: stage s on IPU s) or has one entry
//     per stage ("Each stage must be mapped to an IPU: %d mappings != %d
//     stages"), each a valid IPU index (>= 0).
//  3. Interleaved training puts at most one stage per IPU (Graphcore raises
//     NotImplementedError: its 1F1B alternation needs the IPU's forward and
//     backward slots free).
//  4. gradient_accumulation_count >= N for Grouped and Interleaved (below
//     that the pipeline never has every IPU busy at once: PopTorch's rule,
//     "gradientAccumulation must be greater than or equal to the number of
//     pipeline stages"), >= 1 for Sequential.
//     Graphcore's TensorFlow port is stricter: a positive multiple of L, the
//     overlap length = micro-batches in flight per steady-state repeat block
//     (pipeline_visitor.cc:588-610): Grouped training 2N, Grouped inference
//     N, Interleaved N; for Interleaved with IPUs shared by several stages
//     (inference only) the number of rotations of the device sequence that
//     never put one IPU twice in one time slot (Graphcore's CircularUnion),
//     e.g. 2 for [0, 1, 0, 1]. That multiple comes from its code generator,
//     which unrolls the steady state in blocks of L; ipuflow's runtime
//     executes the exact table for any count (ramp-up, steady state,
//     ramp-down), so 10 micro-batches on 4 stages, the PopTorch tutorial's
//     setting, runs. OverlapLength is kept for the planner and the error
//     hints (a count that also runs on Graphcore's port).
//  5. torch.distributed.pipelining's schedules (schedule.h): GPipe and 1F1B
//     one stage per IPU; Interleaved1F1B and LoopedBFS the looped placement
//     (stage s on IPU s mod p); 1F1B M >= N (torch: "Number of microbatches
//     (m) must be greater than or equal to the number of stages (p)."),
//     GPipe, LoopedBFS and Interleaved1F1B M >= 1, Interleaved1F1B M a
//     multiple of its rounds max(1, M / p) (torch: "Interleaved 1F1B
//     requires the number of microbatches to be a multiple of the number
//     of rounds"). Custom (a table given as data) M >= 1; the table itself
//     is checked by the pipeline operator (PipelineOptions::schedule_table).
// Why up front and all at once: Graphcore checks rule 4 only when compiling
// (or on device for a runtime count) and the others one by one in Python; a
// user fixing one knob at a time then recompiles for every error. We return
// InvalidArgument (the configuration is an argument, not device state), one
// line per violation.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_PIPELINING_VALIDATION_H_
#define IPUFLOW_PIPELINING_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// The smallest gradient_accumulation_count of rules 4 and 5 (N for
// Grouped, Interleaved and 1F1B; 1 for the others).
// REQUIRES: num_stages >= 1.
int MinimumGradientAccumulationCount(PipelineSchedule schedule, int num_stages);

// The overlap length L above (Graphcore's port needs a multiple of it).
// `device_mapping` empty = identity; a mapping of the wrong length or with
// negative entries is treated as identity. REQUIRES: num_stages >= 1.
int OverlapLength(PipelineSchedule schedule, int num_stages,
                  const std::vector<int>& device_mapping, bool training);

// OK, or InvalidArgument listing every violated rule (one line each).
absl::Status ValidatePipeline(PipelineSchedule schedule, int num_stages,
                              const std::vector<int>& device_mapping,
                              int gradient_accumulation_count, bool training);

// The violated rules of ValidatePipeline, one line each (empty: valid), so
// the pipeline operator can add its own before reporting them all.
std::vector<std::string> PipelineViolations(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int gradient_accumulation_count,
    bool training);

// OK if `violations` is empty; else InvalidArgument "Invalid pipeline
// (<schedule> <training|inference>, ...):" and one indented line each.
absl::Status InvalidPipelineError(PipelineSchedule schedule, int num_stages,
                                  const std::vector<int>& device_mapping,
                                  int gradient_accumulation_count,
                                  bool training,
                                  const std::vector<std::string>& violations);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_VALIDATION_H_
