// Internal to DataLoader (feeds/data_loader.cc): the option and size checks
// and the SampleOrderPlanner, which computes each epoch's global sample order
// and this process's block of it (the rules are stated in data_loader.h). Split
// out so the arithmetic reads apart from the threading.
//
// Thread safety: the checks are pure functions; a SampleOrderPlanner is not
// thread-safe (DataLoader guards it with its mutex).
#ifndef IPUFLOW_FEEDS_DATA_LOADER_PLAN_H_
#define IPUFLOW_FEEDS_DATA_LOADER_PLAN_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "feeds/data_loader_options.h"

namespace ipuflow::feeds::internal {

inline bool IsAsync(DataLoaderMode m) { return m != DataLoaderMode::kSync; }

// "batch_size(4) x device_iterations(2) x (replicas(8) / input_group_size(2))
// x gradient_accumulation(3)".
std::string Factors(const DataLoaderOptions& o);

// Everything that does not depend on the dataset's size: InvalidArgument
// naming the factor and a valid nearby setting.
absl::Status CheckOptions(const DataLoaderOptions& o);

// The dataset (`n` samples, named `dataset`) must give every process at
// least one step of `c` samples (drop_last) or one sample.
absl::Status CheckSize(const DataLoaderOptions& o, int64_t c, int64_t n,
                       const std::string& dataset);

// The global order of each epoch and this process's block of it. Epochs
// are computed in sequence: each depends on the previous one's leftovers.
class SampleOrderPlanner {
 public:
  // `per_process`: samples per process and epoch (drop_last: S * C).
  SampleOrderPlanner(int64_t n, const DataLoaderOptions& o,
                     int64_t per_process);

  // This process's sample indices for epoch `e`. REQUIRES: e >= the last
  // epoch passed to Prune.
  std::shared_ptr<const std::vector<int64_t>> Block(int64_t e);
  // Forgets the blocks of epochs before `before`.
  void Prune(int64_t before);

 private:
  std::shared_ptr<const std::vector<int64_t>> Advance();
  uint64_t Seed(int64_t e) const;

  const int64_t n_;
  const DataLoaderOptions o_;
  const int64_t per_process_;
  int64_t next_epoch_ = 0;
  int64_t ring_start_ = 0;  // No shuffle: where the next epoch starts.
  std::vector<int64_t> used_, left_;  // Shuffle: the last epoch's split.
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> blocks_;
};

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_DATA_LOADER_PLAN_H_
