// DataLoader: turns a dataset of single samples into the combined batches a
// replicated, pipelined device program consumes per host call (PopTorch's
// poptorch.DataLoader, in C++), and splits the data between processes.
//
//   DataLoaderOptions o;
//   o.batch_size = 4; o.device_iterations = 10; o.replicas = 2;
//   o.gradient_accumulation = 8; o.shuffle = true; o.seed = 7;
//   o.mode = DataLoaderMode::kAsync;
//   ASSIGN_OR_RETURN(auto loader, DataLoader::Create(samples, o));
//   loader->combined_batch_size();          // 4 * 10 * 2 * 8 = 640
//   for (int64_t s = 0; s < loader->len(); ++s) {
//     ASSIGN_OR_RETURN(Element batch, loader->Next());   // {[640,...], ...}
//   }
//   loader->StartNextEpoch();
//   // Or feed a device program directly (one pass = one epoch):
//   ASSIGN_OR_RETURN(DatasetPtr micro, loader->ToInfeedDataset());
//   ASSIGN_OR_RETURN(auto infeed, IPUInfeedQueue::Create(micro->Repeat(3)));
//
// One step yields C = batch_size x device_iterations x (replicas /
// input_group_size) x gradient_accumulation samples (replicas: this
// process's). Every process computes the same global order of each epoch
// and takes one contiguous block of it; kSync loads on the caller's thread,
// kAsync and kAsyncRebatched in worker threads, all yielding the same
// batches. The rules (row layout, replica grouping, infeed layout, split by
// process and the leftover rule, modes, samples) are in docs/DATA_LOADER.md.
//
// Thread safety: one consumer thread at a time calls Next, StartNextEpoch
// and epoch() (or iterates ToInfeedDataset: the infeed's host thread is then
// that consumer); the other accessors are constant and callable anywhere.
// The destructor stops and joins the workers, whatever ring slot they wait
// for (once no ToInfeedDataset dataset shares them); a worker inside the
// samples dataset (a blocked generator) delays it.
// A returned batch is a tensor the caller owns (no aliasing of a ring slot,
// unlike PopTorch's shared memory). Its memory may be that of an earlier
// batch: the loader keeps the buffers of batches once nothing references
// them any more (no Tensor, slice or view of them is left) and fills later
// batches into them, sparing a fresh allocation's page faults per step.
#ifndef IPUFLOW_FEEDS_DATA_LOADER_H_
#define IPUFLOW_FEEDS_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "feeds/data_loader_options.h"
#include "feeds/dataset.h"

namespace ipuflow::feeds {

class DataLoader {
 public:
  // `samples`: a finite dataset of single samples (no batch dimension) with
  // equal shapes. InvalidArgument naming every factor and a nearby valid
  // setting for: a factor <= 0, a process index out of range, an input
  // group size that is larger than or does not divide the replicas, kAsync
  // with drop_last = false and no rebatched_worker_size, a worker size above
  // C, an empty or infinite dataset, or one smaller than a step (see the file
  // comment); for a field above its limit (replicas and input_group_size
  // 1024, process_count 2^16, buffer_size 1024, num_workers 256, 2^20 ring
  // slots) or an enum value out of range, naming the field, the value and
  // the limit (core/option_checks.h). A dataset of unknown cardinality is
  // read here to count it, unless it repeats forever (Dataset::
  // RepeatsForever: refused unread).
  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(
      DatasetPtr samples, const DataLoaderOptions& options);
  // The same loader standing at `sample` (samples of this process already
  // consumed) of epoch `epoch`, as if the steps before had been taken: the
  // next batch is the one an uninterrupted loader would give there (the
  // same order, shuffle and worker split). A checkpoint's resume
  // (core/checkpoint/training_state.h). `sample` must be a whole number of
  // steps (a multiple of C) up to samples_per_epoch() (the end of an epoch
  // is the start of the next); epoch at most kMaxStartEpoch (the plans of
  // the epochs before are computed: O(epoch x N)). Otherwise
  // InvalidArgument naming both and C.
  static absl::StatusOr<std::unique_ptr<DataLoader>> CreateAt(
      DatasetPtr samples, const DataLoaderOptions& options, int64_t epoch,
      int64_t sample);
  static constexpr int64_t kMaxStartEpoch = int64_t{1} << 20;
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const DataLoaderOptions& options() const;
  // C (docs/DATA_LOADER.md) and the micro-batches per replica per step.
  int64_t combined_batch_size() const;
  // Steps (Next() calls) per epoch for this process: len(loader).
  int64_t len() const;
  int64_t steps_per_epoch() const { return len(); }
  // Samples this process yields per epoch, and the samples of the dataset
  // that no process uses in an epoch (drop_last: N - P * n, else 0).
  int64_t samples_per_epoch() const;
  int64_t unused_samples_per_epoch() const;
  int64_t num_samples() const;  // N.
  int64_t epoch() const;        // 0 until the first StartNextEpoch.
  // Where the loader started (CreateAt; 0 and 0 for Create).
  int64_t start_epoch() const;
  int64_t start_sample() const;
  DataLoaderPlanKey plan_key() const;

  // The next combined batch of this epoch: tensors of leading dimension C
  // (the last one shorter with drop_last = false); OutOfRange after len()
  // batches. A sample's error in place of its batch.
  absl::StatusOr<Element> Next();
  // Begins the next epoch. The rest of the current one is skipped (async
  // modes still wait for the workers to load it, then drop it: its ring
  // slots must be freed in order).
  void StartNextEpoch();
  // Sample indices (positions in `samples`) of this process's epoch `e`,
  // in the order Next() yields them. For tests and checkpoints; computes
  // the plans up to `e`.
  std::vector<int64_t> EpochSampleIndices(int64_t e) const;

  // Micro-batch elements (leading dimension batch_size) in infeed order for
  // `replicas` replicas (docs/DATA_LOADER.md, "Infeed layout"). Each pass over
  // the dataset is one epoch of this loader: the first pass continues the
  // current epoch, each later pass starts the next one. Its iterators are the
  // loader's consumer (do not call Next meanwhile). The dataset shares the
  // loader's state: destroying the loader first is safe, the workers then stop
  // when the dataset goes. A failed step yields its error in place of each of
  // its micro-batches, so every replica sees it and the round robin stays
  // aligned. InvalidArgument (PopTorch's "Invalid batch dimension" naming every
  // factor) when drop_last = false leaves a short last batch that cannot
  // be cut into micro-batches.
  absl::StatusOr<DatasetPtr> ToInfeedDataset();
  // The DataLoader whose ToInfeedDataset() `dataset` is, or yields one for
  // one (through Dataset::ordered_input: Map, Prefetch, Repeat, Take); null
  // when there is none. It shares that loader's state and answers its
  // accessors: what an infeed saves its position from
  // (feeds/infeed_position.h). Call only its const methods.
  static std::shared_ptr<const DataLoader> Behind(const Dataset& dataset);

  // For tests: batches (kAsync) or worker batches (kAsyncRebatched) loaded
  // and waiting in the ring, and workers waiting for a free slot.
  int64_t ready_units() const;
  int waiting_workers() const;

 private:
  class Impl;
  class InfeedDataset;  // What ToInfeedDataset returns.
  explicit DataLoader(std::shared_ptr<Impl> impl);
  // Shared with the datasets ToInfeedDataset made.
  std::shared_ptr<Impl> impl_;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATA_LOADER_H_
