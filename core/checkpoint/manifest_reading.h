// Reading a checkpoint's manifest for TrainingCheckpoint (training_state.h)
// and the inputs it saves and resumes (feeds/infeed_position.h,
// feeds/resume_input.h): types as text, the feeds by name, the random
// streams' keys. The manifest is read from a file: every count is checked.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_CORE_CHECKPOINT_MANIFEST_READING_H_
#define IPUFLOW_CORE_CHECKPOINT_MANIFEST_READING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint.pb.h"
#include "core/tensor.h"

namespace ipuflow::checkpoint {

// "float16[4,3]".
std::string TypeString(DType dtype, const TensorShape& shape);
TensorShape ShapeOf(const TensorEntry& e);
std::string EntryType(const TensorEntry& e);

// Key of a program's run counter in the file: "replica 1|loop:body", the
// replica global (its index over every process).
std::string ProgramKey(int replica, const std::string& key);

const InfeedPosition* FindInfeed(const Manifest& m, const std::string& name);
const DataLoaderPosition* FindLoader(const Manifest& m,
                                     const std::string& name);
// The infeeds' names, "a, b" ("none").
std::string InfeedNames(const Manifest& m);

// Elements the replicas consumed in all; FailedPrecondition unless every
// replica consumed the same count (the round robin is then at replica 0),
// InvalidArgument for a negative count or a total past int64.
absl::StatusOr<int64_t> TotalConsumed(const InfeedPosition& p);
// A DataLoader's samples before its position, epoch x samples per epoch +
// sample; InvalidArgument naming the three when they are not a position or
// overflow int64 (the manifest is read from a file).
absl::StatusOr<int64_t> LoaderPosition(const DataLoaderPosition& l);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_MANIFEST_READING_H_
