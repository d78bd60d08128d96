// A checkpoint file: one file per checkpoint, a manifest (checkpoint.proto)
// and the tensors' bytes, each with its CRC32C (crc32c.h). The layout and
// the rules are in docs/CHECKPOINTS.md:
//
//   "IPUFCKPT" | u32 version | u32 CRC32C of the manifest |
//   u64 manifest bytes | manifest | zeros to 64 | payload
//
// where the payload holds each tensor at a multiple of 64 bytes, in manifest
// order. Writing goes to "<path>.tmp-<pid>", is fsynced, renamed over
// <path> and the directory fsynced, so a crash at any point leaves either
// the old file or the new one, never a part (rename(2) is atomic). Reading
// checks everything before returning anything: a file that is corrupt,
// truncated, or whose manifest is inconsistent is refused with an error
// naming the file and the tensor at fault.
//
//   CheckpointContents c;                    // manifest fields + tensors
//   RETURN_IF_ERROR(WriteCheckpointFile("/ckpt/a.ipuckpt", &c));
//   ASSIGN_OR_RETURN(CheckpointContents back, ReadCheckpointFile(path));
//
// A directory of numbered checkpoints: checkpoint_directory.h.
//
// Thread safety: functions share no state. Two writers of one directory
// must not run at once (the caller's run writes its checkpoints in order).
#ifndef IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_FILE_H_
#define IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_FILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/checkpoint/checkpoint.pb.h"
#include "core/tensor.h"

namespace ipuflow::checkpoint {

inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr char kCheckpointMagic[8] = {'I', 'P', 'U', 'F',
                                             'C', 'K', 'P', 'T'};
// A manifest larger than this is refused unread (a tensor entry is ~50
// bytes: a million variables fit).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 28;
inline constexpr int kMaxTensorRank = 32;

// A checkpoint in memory: tensors[i] is the value of manifest.tensors(i).
// Writing fills each entry's dtype, shape, offset, size and CRC from the
// tensor (its name and replica are the caller's).
struct CheckpointContents {
  Manifest manifest;
  std::vector<Tensor> tensors;
};

struct WriteOptions {
  // Called after each write(2) to the temporary file with the bytes written
  // so far: tests stop a writer at a chosen offset (a SIGKILL from here).
  std::function<void(int64_t bytes_written)> after_write;
};

// Writes `contents` to `path` atomically (above); fills the manifest's
// tensor entries and payload size. Errors name the path and the failing
// call; the temporary file is removed on error.
absl::Status WriteCheckpointFile(const std::string& path,
                                 CheckpointContents* contents,
                                 const WriteOptions& options = {});

// Reads and checks a checkpoint file (every CRC, size and entry) into
// tensors that view one buffer. DataLoss for a corrupt or truncated file,
// InvalidArgument for a manifest that contradicts itself, NotFound for a
// missing file; errors start "checkpoint '<path>': ".
absl::StatusOr<CheckpointContents> ReadCheckpointFile(const std::string& path);
// Only the header and the manifest of a checkpoint file (magic, version,
// the manifest's size and CRC32C checked; the payload is not read): what a
// checkpoint directory is listed by. Errors as ReadCheckpointFile's.
absl::StatusOr<Manifest> ReadCheckpointManifest(const std::string& path);
// The same checks on bytes in memory (`what` names them in errors).
absl::StatusOr<CheckpointContents> ParseCheckpoint(absl::string_view bytes,
                                                   absl::string_view what);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_CHECKPOINT_FILE_H_
