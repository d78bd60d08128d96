// The input of a resumed run (docs/CHECKPOINTS.md, "What a checkpoint
// holds"): an infeed's dataset without what the devices consumed, or its
// DataLoader standing where the saved one's device stood. Called before
// the resumed run's graph is built on them; TrainingCheckpoint::Restore
// (training_state.h) then checks that the loader stands there.
//
// Thread safety: pure functions of the checkpoint.
#ifndef IPUFLOW_CORE_CHECKPOINT_RESUME_INPUT_H_
#define IPUFLOW_CORE_CHECKPOINT_RESUME_INPUT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_file.h"
#include "feeds/data_loader.h"
#include "feeds/dataset.h"

namespace ipuflow::checkpoint {

// The dataset an infeed saved as `name` reads in the resumed run: `dataset`
// without the elements the devices consumed (Skip: a deterministic dataset
// replays its order, shuffle buffers included). FailedPrecondition when the
// replicas had consumed different counts; NotFound naming the infeeds the
// checkpoint has.
absl::StatusOr<feeds::DatasetPtr> ResumeDataset(const CheckpointContents& c,
                                                const std::string& name,
                                                feeds::DatasetPtr dataset);

// The DataLoader of infeed `name` in the resumed run: `samples` and
// `options` as saved (the replica count may differ where the split allows),
// standing where the saved one's device had consumed (DataLoader::
// CreateAt). InvalidArgument naming the field and both values when the
// samples or options give another order (or, in a multi-process run,
// another process's part: options.process_index).
absl::StatusOr<std::unique_ptr<feeds::DataLoader>> ResumeDataLoader(
    const CheckpointContents& c, const std::string& name,
    feeds::DatasetPtr samples, const feeds::DataLoaderOptions& options);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_RESUME_INPUT_H_
