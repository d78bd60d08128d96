// An infeed's part of a training checkpoint (core/checkpoint/
// checkpointed_input.h): what its replicas consumed, and where the
// DataLoader behind it stands. The infeed's channel (infeed_queue.cc) calls
// these with its counts. Internal to feeds/.
//
// Thread safety: pure functions.
#ifndef IPUFLOW_FEEDS_INFEED_POSITION_H_
#define IPUFLOW_FEEDS_INFEED_POSITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint.pb.h"
#include "feeds/data_loader.h"

namespace ipuflow::feeds::internal {

// Adds infeed `name`'s position for `replicas` replicas to `m`: replica r
// consumed base[r] (before this queue existed) + consumed[r] (missing
// entries: 0), and, with a `loader` (may be null), the loader's position
// after the devices consumed sum(consumed) of its micro-batches.
// FailedPrecondition part-way through one of the loader's steps.
absl::Status SaveInfeedPosition(const std::string& name,
                                const std::vector<int64_t>& base,
                                const std::vector<int64_t>& consumed,
                                const DataLoader* loader, int replicas,
                                checkpoint::Manifest* m);

// Checks `m`'s position of infeed `name` against a queue whose replicas
// consumed `consumed` (all 0: restore before the first run) and which
// reads `loader` (may be null): present, splitting over `replicas`, a
// loader standing there. Returns what each replica had consumed.
absl::StatusOr<int64_t> CheckInfeedPosition(
    const std::string& name, const std::vector<int64_t>& consumed,
    const DataLoader* loader, const checkpoint::Manifest& m, int replicas);

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_INFEED_POSITION_H_
