// The input of a resumed run (docs/CHECKPOINTS.md, "What a checkpoint
// holds"): an infeed's dataset without what the devices consumed, or its
// DataLoader standing where the saved one's device stood. Called before
// the resumed run's graph is built on them; TrainingCheckpoint::Restore
// (core/checkpoint/training_state.h) then checks that the infeed of the
// same name stands there.
//
// Thread safety: pure functions of the checkpoint.
#ifndef IPUFLOW_FEEDS_RESUME_INPUT_H_
#define IPUFLOW_FEEDS_RESUME_INPUT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_file.h"
#include "feeds/data_loader.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds {

// The dataset an infeed saved as `name` reads in the resumed run: `dataset`
// without the elements the devices consumed (Skip: a deterministic dataset
// replays its order, shuffle buffers included). FailedPrecondition when the
// replicas had consumed different counts; NotFound naming the infeeds the
// checkpoint has.
absl::StatusOr<DatasetPtr> ResumeDataset(
    const checkpoint::CheckpointContents& c, const std::string& name,
    DatasetPtr dataset);

// The DataLoader of infeed `name` in the resumed run: `samples` and
// `options` as saved (the replica count may differ where the split allows),
// standing where the saved one's device had consumed (DataLoader::
// CreateAt). InvalidArgument naming the field and both values when the
// samples or options give another order (or, in a multi-process run,
// another process's part: options.process_index).
absl::StatusOr<std::unique_ptr<DataLoader>> ResumeDataLoader(
    const checkpoint::CheckpointContents& c, const std::string& name,
    DatasetPtr samples, const DataLoaderOptions& options);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_RESUME_INPUT_H_
