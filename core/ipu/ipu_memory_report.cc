// The one per-IPU memory report and check (device_program.h): what each
// IPU of a replica holds by category (core/memory_plan.h's IpuMemory)
// against its budget.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/ipu/device_program.h"

namespace ipuflow {

namespace {

// The largest variables of a shard (loop bodies' included), for the
// out-of-memory report.
std::string LargestVariables(
    std::vector<std::pair<const Node*, int64_t>> vars) {
  std::stable_sort(vars.begin(), vars.end(), [](const auto& a, const auto& b) {
    return a.second > b.second;
  });
  std::string out;
  for (size_t i = 0; i < vars.size() && i < 3; ++i) {
    const Node& n = *vars[i].first;
    absl::StrAppend(&out, i ? ", " : " (largest: ", "'", n.name(), "' ");
    if (n.has_attr("dtype") && n.has_attr("shape")) {
      absl::StrAppend(&out, DTypeName(n.attr<DType>("dtype")),
                      n.attr<TensorShape>("shape").DebugString(), " ");
    }
    absl::StrAppend(&out, HumanBytes(vars[i].second));
  }
  if (!vars.empty()) absl::StrAppend(&out, ")");
  return out;
}

// What device loops' bodies add (already in the totals), if any.
std::string LoopBodies(const IpuMemory& m) {
  if (m.largest_loop_body.empty()) return "";
  return absl::StrCat(
      "\n    loop bodies:     ", HumanBytes(m.loop_body_peak_bytes),
      " peak (largest: '", m.largest_loop_body, "'), ",
      HumanBytes(m.loop_body_always_live_bytes),
      " always-live (constants and variables built in bodies)");
}

}  // namespace

std::string IpuMemoryReport(int ipu, int shard, const IpuMemory& m,
                            int64_t budget) {
  const int64_t total = m.total();
  std::string remote;
  if (m.offload) {
    remote = absl::StrCat("\n    remote memory: optimizer state ",
                          HumanBytes(m.remote_state),
                          " (streamed in for each weight update)");
    if (m.sharded_over > 1) {
      absl::StrAppend(&remote, "; sharded over ", m.sharded_over,
                      " replicas: ", HumanBytes(m.remote_shards),
                      " per replica, saving ",
                      HumanBytes(m.remote_state - m.remote_shards));
    }
  }
  return absl::StrCat(
      "  IPU ", ipu, " (shard ", shard, "): ", HumanBytes(total), " of ",
      HumanBytes(budget), absl::StrFormat(" (%.1f%%)", 100.0 * total / budget),
      "\n    always-live:     ", HumanBytes(m.always_live()), " = weights ",
      HumanBytes(m.weights), " + gradient accumulators ",
      HumanBytes(m.accumulators), " + optimizer state ",
      HumanBytes(m.optimizer_state), " + constants ", HumanBytes(m.constants),
      LargestVariables(m.variables), remote,
      "\n    not-always-live: ", HumanBytes(m.arena), " peak",
      m.arena_owner.empty()
          ? ""
          : absl::StrCat(" (largest arena: ", m.arena_owner, ")"),
      " of ", m.num_planned_values, " intermediates by liveness (",
      HumanBytes(m.unplanned_bytes), " without reuse); weight update ",
      HumanBytes(m.update_arena), LoopBodies(m),
      "\n    stash:           ", HumanBytes(m.stash), "; incoming FIFOs ",
      HumanBytes(m.fifos), "\n");
}

absl::Status CheckIpuMemory(IPUSystem& system, const std::string& what,
                            const std::vector<IpuMemory>& ipus,
                            std::string* report) {
  bool oom = false;
  report->clear();
  for (size_t k = 0; k < ipus.size(); ++k) {
    const int64_t budget = system.device(k).memory_budget_bytes();
    oom |= ipus[k].total() > budget;
    absl::StrAppend(report,
                    IpuMemoryReport(static_cast<int>(k), static_cast<int>(k),
                                    ipus[k], budget));
  }
  if (!oom) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory: ", what, " does not fit on its IPUs (",
      system.config().tiles_per_ipu(), " tiles x ",
      HumanBytes(system.config().memory_per_tile()), " per IPU)\n", *report));
}

}  // namespace ipuflow
