// What the main example prints that is not the tutorial's own logic: the
// DataLoader's and the training's summaries, the training report (speed,
// the replicas' agreement, the loss scale, the pipeline's virtual-clock
// timeline), the test accuracy and the --debug / --profile files. Its
// flags are examples/tutorial_flags.h.
#ifndef IPUFLOW_EXAMPLES_TUTORIAL_REPORTS_H_
#define IPUFLOW_EXAMPLES_TUTORIAL_REPORTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/ipu/executable.h"
#include "examples/tutorial_flags.h"
#include "examples/tutorial_support.h"
#include "feeds/data_loader.h"
#include "pipelining/pipeline.h"

namespace ipuflow::examples {

// "DataLoader (kAsync, 1 worker(s)): combined batch 40 x 10 device
// iterations x ...": the training loader's combined batch and calls.
void PrintDataLoader(const TutorialFlags& flags,
                     const feeds::DataLoader& train_loader);

// "Training the ConvNet (B1-B4 on IPUs 0-3, pipelined) x 1 replica(s) ...":
// what the training calls will do; Print: flushed before the progress bar
// starts.
std::string TrainingSummary(const TutorialFlags& flags);
void PrintTrainingSummary(const TutorialFlags& flags);

// After `calls` training calls that took `seconds` (this run's; every
// process made as many): "Trained N micro-batches (U weight updates) in S
// s: I images/s; last M micro-batches: loss L, accuracy A%" (`monitor`'s
// window); with replicas, "Replicas in step: ..." (data parallelism: every
// replica applies the same averaged update, so weights and optimizer state
// must be bitwise equal; Internal naming the first difference); with
// --precision fp16, the loss scale; then "Pipeline (replica 0, last call,
// virtual clocks): ... images/s on 4 IPUs, bubble ..., utilisation ...".
// Virtual clocks count each IPU's own CPU time: what R x 4 IPUs that do not
// share the host's cores would take.
absl::Status ReportTraining(const TutorialFlags& flags, int64_t calls,
                            double seconds, const OutfeedMonitor& monitor,
                            const pipelining::Pipeline& training,
                            const Executable& trained);

// "Test accuracy: A% (C of N images, I images/s)".
void PrintTestAccuracy(double correct, int64_t images, double seconds);

// --profile: makes the directory and checks a file can be written there,
// before training: PermissionDenied naming it and why otherwise.
absl::Status PrepareProfileDir(const std::string& dir);

// --debug: the pipelines' summaries, the memory per IPU and the transfers;
// --profile: for the last training and inference calls (replica 0),
// train_trace.json (ui.perfetto.dev), train_timeline.svg, test_trace.json,
// test_timeline.svg and summary.txt in --profile-dir; PermissionDenied
// naming the file that could not be written (the example exits 1).
absl::Status WriteReports(const TutorialFlags& flags,
                          const pipelining::Pipeline& training,
                          const pipelining::Pipeline& inference,
                          const Executable& trained, const IPUSystem& system);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_TUTORIAL_REPORTS_H_
