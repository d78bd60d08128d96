// What a DataLoader (feeds/data_loader.h) is configured with, and what the
// processes that split a dataset between them must agree on. The factors'
// meaning (combined batch, replica grouping, split by process, modes) is
// stated in data_loader.h.
#ifndef IPUFLOW_FEEDS_DATA_LOADER_OPTIONS_H_
#define IPUFLOW_FEEDS_DATA_LOADER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/ipu/collective_group.h"
#include "core/ipu/process_link.h"

namespace ipuflow::feeds {

enum class DataLoaderMode { kSync, kAsync, kAsyncRebatched };
// The collectives' grouping type (core/ipu/collective_group.h): input
// groups are replica groups. kAll is refused ("input_group_type cannot be
// All", as the original).
using ReplicaGroupType = ReplicaGroups::Type;

struct DataLoaderOptions {
  int64_t batch_size = 1;  // Micro-batch: what one replica sees.
  int64_t device_iterations = 1;
  int64_t replicas = 1;  // Local replicas of this process.
  int64_t gradient_accumulation = 1;
  // Replicas per input group (poptorch inputReplicaGrouping).
  int64_t input_group_size = 1;
  ReplicaGroupType input_group_type = ReplicaGroupType::kConsecutive;
  int64_t process_index = 0;
  int64_t process_count = 1;
  bool shuffle = false;
  uint64_t seed = 0;      // Must be equal on every process.
  bool drop_last = true;  // PopTorch's default (torch: false).
  DataLoaderMode mode = DataLoaderMode::kSync;
  int64_t buffer_size = 3;  // Ring slots, in combined batches.
  bool early_preload = false;
  bool load_indefinitely = true;
  int64_t rebatched_worker_size = 0;  // 0: the combined batch size.
  int64_t num_workers = 1;            // Async modes only.
  // A samples dataset of unknown size (FromGenerator without a cardinality,
  // a Filter) is counted by reading it, and the DataLoader keeps every
  // sample it reads, so it is read only up to a bound: a Take(n) outermost
  // (Dataset::CardinalityBound), or this many samples, beyond which Create
  // refuses it. 0 (the default): only a Take bounds it; without one the
  // dataset is refused unread, naming it and this option.
  int64_t unknown_size_limit = 0;
};

// What every process must agree on for the split by process to be a
// partition of the dataset. The multi-process layer gathers each process's
// DataLoader::plan_key() and calls CheckProcessesAgree before the first step.
struct DataLoaderPlanKey {
  int64_t num_samples = 0;
  uint64_t seed = 0;
  bool shuffle = false;
  bool drop_last = true;
  int64_t combined_batch_size = 0;
  int64_t process_count = 1;
};

// OK if there is one key per process (keys[i] from process i) and all are
// equal; otherwise InvalidArgument naming the field, the processes and
// their values (the original has no such check: processes that read
// different data silently use some samples twice and others never).
absl::Status CheckProcessesAgree(absl::Span<const DataLoaderPlanKey> keys);

// The multi-process layer's half: gathers every process's key over `link`
// (a collective: every process calls it, before its first step) and checks
// them with CheckProcessesAgree, so every process gets the same verdict.
// Also InvalidArgument when the key's process_count or `process_index`
// is not the link's (docs/DISTRIBUTED.md).
absl::Status AgreeAcrossProcesses(const DataLoaderPlanKey& mine,
                                  int64_t process_index, ProcessLink& link);

// "kSync", "kAsync", "kAsyncRebatched". (Groups: ReplicaGroups::DebugString.)
std::string DataLoaderModeName(DataLoaderMode mode);

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATA_LOADER_OPTIONS_H_
