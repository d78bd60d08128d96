// A directory of numbered checkpoints, "ckpt-<step, 12 digits>.ipuckpt"
// (checkpoint_file.h's files), of one training run: the newest K kept,
// temporary files of killed writers removed, the newest found
// (docs/CHECKPOINTS.md, "One run per directory"). A file counts as a
// checkpoint by its manifest, not its name alone; a save into a directory
// of another run's checkpoints, or behind this run's newest, is refused.
//
//   ASSIGN_OR_RETURN(std::string path,
//                    WriteNumberedCheckpoint("/ckpt", step, &c, /*keep=*/3));
//   ASSIGN_OR_RETURN(std::string newest, LatestCheckpoint("/ckpt"));
//
// Thread safety: functions share no state. Two writers of one directory
// must not run at once (the caller's run writes its checkpoints in order).
#ifndef IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_DIRECTORY_H_
#define IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_file.h"

namespace ipuflow::checkpoint {

// "<dir>/ckpt-<step, 12 digits>.ipuckpt".
std::string NumberedCheckpointPath(const std::string& dir, int64_t step);
// A multi-process checkpoint's part of `process` (process_parts.h):
// "<dir>/ckpt-<step, 12 digits>.ipuckpt.part-<process>-of-<processes>".
// Not a checkpoint by itself: LatestCheckpoint lists committed files only.
std::string ProcessPartPath(const std::string& dir, int64_t step, int process,
                            int processes);
// Removes every file of `dir` that belongs to a numbered checkpoint (the
// file, its parts, temporary files) except those of the newest `keep_last`
// (>= 1, else InvalidArgument) committed checkpoints and of checkpoint
// `also_keep` (a save's own), and every temporary file: call it when no
// writer of `dir` is running. Refuses (FailedPrecondition, nothing removed)
// a directory ListCheckpoints refuses.
absl::Status RemoveOldCheckpoints(const std::string& dir, int keep_last,
                                  int64_t also_keep = -1);
// OK when checkpoint `step` of run `run_id` (Manifest.run_id) may be
// written into `dir`: it is missing, empty of checkpoints, or holds only
// this run's at weight updates up to `step`. Otherwise FailedPrecondition
// naming the other run and its newest checkpoint, or this run's later
// checkpoint, or what ListCheckpoints refuses, and how to proceed.
absl::Status CheckCheckpointDirectory(const std::string& dir, uint64_t run_id,
                                      int64_t step);
// Writes checkpoint number `step` in `dir` (created if missing; refused by
// CheckCheckpointDirectory before anything is written), with the
// manifest's weight_updates set to `step`, then deletes the oldest numbered
// checkpoints so that `keep_last` (>= 1) remain, never this one, and
// temporary files a killed writer left. Returns the path.
absl::StatusOr<std::string> WriteNumberedCheckpoint(
    const std::string& dir, int64_t step, CheckpointContents* contents,
    int keep_last, const WriteOptions& options = {});
// The numbered checkpoints of `dir`, oldest first: {step, path}. Each
// file's manifest is read (ReadCheckpointManifest, not the payload):
// FailedPrecondition naming a file that is not a readable checkpoint or
// whose weight update is not its name's step, or naming two runs whose
// checkpoints share the directory. NotFound when it cannot be listed.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
    const std::string& dir);
// The newest numbered checkpoint of `dir` (ListCheckpoints' last); NotFound
// naming the directory when there is none.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_DIRECTORY_H_
