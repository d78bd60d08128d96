// The checkpoint of a multi-process run (docs/CHECKPOINTS.md, "More than
// one process"): process 0 writes the shared file, every process its own
// part, in a directory every process sees (a shared file system):
//
//   ckpt-<step>.ipuckpt                  process 0: the manifest (topology,
//                                        model, steps, seed) and the
//                                        variables every replica of every
//                                        process holds alike
//   ckpt-<step>.ipuckpt.part-<p>-of-<P>  process p: its replicas' other
//                                        variables, random streams, infeed
//                                        and DataLoader positions
//
// Commit: every process writes its part (temporary name, fsync, rename);
// the processes meet; only when every part is written does process 0
// write the shared file (its rename is the commit, the last step), then
// removes what keep_last no longer keeps; the processes meet again and all
// return the same status. A crash before the shared file's rename leaves
// the previous checkpoint the newest (LatestCheckpoint lists committed
// files only); every file of one checkpoint carries the same random id, so
// a part left by a crashed attempt is never read as another's.
//
// Reading gives a process its view: the shared file's manifest and
// variables plus its part's (CheckpointContents as TrainingCheckpoint::
// Capture returns it), refusing another process count by both values.
//
// Thread safety: functions share no state; every process of the link must
// call WriteProcessCheckpoint for the same step, from one thread each.
#ifndef IPUFLOW_CORE_CHECKPOINT_PROCESS_PARTS_H_
#define IPUFLOW_CORE_CHECKPOINT_PROCESS_PARTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_directory.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/ipu/process_link.h"

namespace ipuflow::checkpoint {

// Splits this process's view `c` (its manifest's part set; tensors of
// replica -1 are the shared ones) into the shared file (written by process
// 0) and this process's part, and commits checkpoint `step` of `dir`
// (above). Returns the shared file's path. Every process gets the same
// error when any process fails ("process 1 could not write its part: ...;
// the previous checkpoint stays the newest").
absl::StatusOr<std::string> WriteProcessCheckpoint(
    const std::string& dir, int64_t step, const CheckpointContents& c,
    int keep_last, ProcessLink& link, const WriteOptions& options = {});

// The checkpoint whose committed file is `path`, as process
// `process_index` of `process_count` sees it: a single-process checkpoint
// as read (process_count 1), a multi-process one merged with its part.
// InvalidArgument naming both process counts when they differ; DataLoss
// when the part is missing, damaged or of another checkpoint.
absl::StatusOr<CheckpointContents> ReadCheckpoint(const std::string& path,
                                                  int process_index = 0,
                                                  int process_count = 1);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_PROCESS_PARTS_H_
