#include "pipelining/pipeline_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/ipu/ipu_system.h"

namespace ipuflow::pipelining {

std::string PipelineReport::Summary() const {
  const int n = table.num_stages;
  std::string s = absl::StrFormat(
      "%s %s pipeline: %d stages on %d IPUs, %d micro-batches x %d runs%s%s\n",
      PipelineScheduleName(table.kind),
      table.training ? "training" : "inference", n, table.num_ipus,
      table.micro_batches, repeats, recompute ? ", recomputation" : "",
      replicas > 1 ? absl::StrFormat(" (replica 0 of %d; the others run the "
                                     "same table on their own IPUs)",
                                     replicas)
                   : std::string());
  absl::StrAppend(&s, "  virtual time ", HumanSeconds(virtual_seconds),
                  " (weight updates ", HumanSeconds(weight_update_seconds),
                  "), wall time ", HumanSeconds(wall_seconds), "\n");
  absl::StrAppend(
      &s, absl::StrFormat(
              "  bubble %.1f%% measured, %.1f%% planned from the measured "
              "stage costs, %.1f%% theory (N-1)/(M+N-1)\n",
              100 * bubble, 100 * planned_bubble, 100 * theoretical_bubble));
  absl::StrAppend(&s, "  per run: ", HumanSeconds(measured_seconds_per_run),
                  " measured, ", HumanSeconds(planned_seconds_per_run),
                  " planned\n");
  for (size_t k = 0; k < ipu_utilisation.size(); ++k) {
    absl::StrAppend(
        &s, absl::StrFormat("  IPU %d: utilisation %5.1f%%, busy %s, peak "
                            "memory %s of %s\n",
                            k, 100 * ipu_utilisation[k],
                            HumanSeconds(ipu_busy_seconds[k]),
                            HumanBytes(ipu_peak_bytes[k]),
                            HumanBytes(ipu_budget_bytes[k])));
  }
  for (int st = 0; st < n; ++st) {
    absl::StrAppend(&s, "  stage ", st, ": forward ",
                    HumanSeconds(stage_costs.forward[st]));
    if (table.training) {
      absl::StrAppend(&s, ", backward ", HumanSeconds(stage_costs.backward[st]),
                      "; stash ", stash_occupancy[st],
                      " at step boundaries (FIFO ", stash_capacity[st], " x ",
                      HumanBytes(stash_bytes_per_micro_batch[st]), ")");
    }
    if (st + 1 < n) {
      absl::StrAppend(&s, "; activation FIFO peak ",
                      activation_fifo_occupancy[st], " of ",
                      activation_fifo_capacity[st]);
    }
    absl::StrAppend(&s, "\n");
  }
  absl::StrAppend(&s, "  bytes: host->IPU ", HumanBytes(host_to_device_bytes),
                  ", IPU->IPU ", HumanBytes(ipu_to_ipu_bytes),
                  offloaded_bytes_streamed > 0
                      ? absl::StrCat(", remote memory ",
                                     HumanBytes(offloaded_bytes_streamed))
                      : "",
                  "\n");
  return s;
}

}  // namespace ipuflow::pipelining
