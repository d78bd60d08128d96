// A directory of numbered checkpoints, "ckpt-<step, 12 digits>.ipuckpt"
// (checkpoint_file.h's files): the newest K kept, temporary files of killed
// writers removed, the newest found (docs/CHECKPOINTS.md, "The file").
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
// committed checkpoints, and every temporary file: call it when no writer
// of `dir` is running.
absl::Status RemoveOldCheckpoints(const std::string& dir, int keep_last);
// Writes checkpoint number `step` in `dir` (created if missing), then
// deletes the oldest numbered checkpoints so that `keep_last` (>= 1)
// remain, and temporary files a killed writer left. Returns the path.
absl::StatusOr<std::string> WriteNumberedCheckpoint(
    const std::string& dir, int64_t step, CheckpointContents* contents,
    int keep_last, const WriteOptions& options = {});
// The numbered checkpoints of `dir`, oldest first: {step, path}.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
    const std::string& dir);
// The newest numbered checkpoint of `dir`; NotFound naming the directory
// when there is none.
absl::StatusOr<std::string> LatestCheckpoint(const std::string& dir);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_DIRECTORY_H_
