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
// COMBINED BATCH. One step yields
//   C = batch_size x device_iterations x (replicas / input_group_size)
//       x gradient_accumulation
// samples (replicas = this process's local replicas). Rows of a combined
// batch, outermost first: [device_iteration][ga micro-batch][input slice]
// [sample in micro-batch] (PopART's [batches per step][accumulation]
// [replication][micro-batch] layout), i.e. row
//   ((di * GA + ga) * G + g) * batch_size + b,   G = replicas / k,
// k = input_group_size.
//
// REPLICA GROUPING. Replicas in one input group receive the same micro-batch
// (input slice g). kConsecutive: groups {0..k-1}, {k..2k-1}, ..., replica r
// reads slice r / k. kOrthogonal: G groups {0, G, 2G, ...}, {1, G+1, ...},
// replica r reads slice r % G.
//
// INFEED LAYOUT (ToInfeedDataset). IPUInfeedQueue sends element i to replica
// i % R and a step of replica r takes its elements in order (one per device
// iteration, GA of them per iteration in a pipeline). So the micro-batch of
// (di, ga) for replica r is element (di * GA + ga) * R + r: for each di, ga
// and replica r in turn, the rows of slice g(r) above. Without grouping this
// is the combined batch cut into micro-batches in row order.
//
// SPLIT BY PROCESS. Every process computes the same global order of the N
// samples for each epoch (from `seed`, identical everywhere) and takes one
// contiguous block: process p gets positions [p * n, (p + 1) * n).
// - drop_last = true: steps S = floor(N / (C * P)), n = S * C; the last
//   L = N - P * n samples of the order are not used this epoch.
//   LEFTOVER RULE: the L samples left out of epoch e are all used in epoch
//   e + 1 (L < P * n always holds), so no sample is left out of two epochs
//   in a row, for any P. Without shuffle the order walks a ring: epoch e
//   starts at position (e * P * n) mod N of 0..N-1 (it starts with the
//   previous epoch's leftovers). With shuffle, epoch e's used samples are
//   the previous leftovers plus P * n - L samples drawn at random from the
//   previous epoch's used ones, shuffled together; the rest are its
//   leftovers. (PopTorch's _SubDataset computes leftovers as N % per_proc,
//   which is 0 for N = 100, C = 10, P = 4 although 20 samples are unused.)
// - drop_last = false: every sample every epoch; the order is a fresh
//   permutation (or 0..N-1); process p gets N / P samples, one more if
//   p < N % P, and its last batch is short (ceil(n / C) steps; processes
//   may differ by one step).
// Errors instead of PopTorch's ZeroDivisionError / silent empty epoch: a
// dataset with fewer than C * P samples (drop_last) or fewer than P.
//
// MODES. kSync loads on the caller's thread. kAsync: `num_workers` threads
// fill a ring of `buffer_size` combined batches ahead of the consumer.
// kAsyncRebatched: the workers load batches of `rebatched_worker_size`
// samples (default C) that Next() stitches into combined batches, carrying
// the rows left over to the next one (the ring holds buffer_size x
// ceil(C / w) worker batches); with drop_last = false the last batch is
// narrowed to what is left. kAsync with drop_last = false and a
// rebatched_worker_size is rebatched, as in PopTorch. Workers claim work
// in order and the consumer
// takes it in order: every mode yields exactly kSync's batches.
// `early_preload` starts loading at Create (otherwise at the first Next or
// StartNextEpoch);
// `load_indefinitely` lets the workers run into the next epoch (otherwise
// they stop at the end of the epoch until StartNextEpoch).
//
// SAMPLES. The dataset is read once, in order, as the batches need it, and
// its samples are kept for later epochs (a shuffled epoch may need its last
// sample first), like tf.data's Cache: a random Map in the samples dataset
// runs once per sample, not once per epoch. Reads are serialised. A sample's
// error comes back from Next() in place of its batch (kAsyncRebatched: of
// every batch that overlaps the failing worker batch), in order.
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
  // comment). A dataset of unknown cardinality is read here to count it.
  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(
      DatasetPtr samples, const DataLoaderOptions& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  const DataLoaderOptions& options() const;
  // C (see the file comment) and the micro-batches per replica per step.
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
  // `replicas` replicas (see INFEED LAYOUT). Each pass over the dataset is
  // one epoch of this loader: the first pass continues the current epoch,
  // each later pass starts the next one. Its iterators are the loader's
  // consumer (do not call Next meanwhile). The dataset shares the loader's
  // state: destroying the loader first is safe, the workers then stop when
  // the dataset goes.
  // A failed step yields its error in place of each of its micro-batches,
  // so every replica sees it and the round robin stays aligned.
  // InvalidArgument (PopTorch's "Invalid batch dimension" naming every
  // factor) when drop_last = false leaves a short last batch that cannot
  // be cut into micro-batches.
  absl::StatusOr<DatasetPtr> ToInfeedDataset();

  // For tests: batches (kAsync) or worker batches (kAsyncRebatched) loaded
  // and waiting in the ring, and workers waiting for a free slot.
  int64_t ready_units() const;
  int waiting_workers() const;

 private:
  class Impl;
  explicit DataLoader(std::shared_ptr<Impl> impl);
  // Shared with the datasets ToInfeedDataset made.
  std::shared_ptr<Impl> impl_;
};

}  // namespace ipuflow::feeds

#endif  // IPUFLOW_FEEDS_DATA_LOADER_H_
