// Builder::CheckOptions: every option of Pipeline::Create() checked
// before anything is built, all violations collected (pipeline_builder.h),
// in named checks: the device mapping, Interleaved sharing, ranges and
// enums, virtual costs, option combinations, the stage functions.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/gradients.h"
#include "core/op_registry.h"
#include "core/option_checks.h"
#include "ops/array/const.h"
#include "ops/array/fill.h"
#include "ops/collective/sharded_update.h"
#include "ops/control/pipeline_frame.h"
#include "ops/math/add.h"
#include "ops/math/cast.h"
#include "ops/math/mul.h"
#include "ops/state/assign.h"
#include "ops/state/handle.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "pipelining/pipeline_builder.h"
#include "pipelining/pipeline_frame.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/validation.h"

namespace ipuflow::pipelining::internal {

void Builder::CheckOptions() {
  const int n = num_stages();
  ResolveDeviceMapping();
  // validation.h's rules first, then the concurrent-mapping ones.
  std::vector<std::string> rules =
      PipelineViolations(o_.pipeline_schedule, n, logical_mapping_,
                         o_.gradient_accumulation_count, b_->training);
  violations_.insert(violations_.begin(), rules.begin(), rules.end());
  if (n < 2) mapping_ok_ = false;
  CheckInterleavedSharing();
  CheckScheduleTable();
  CheckRanges();
  CheckVirtualCosts();
  CheckCombinations();
  CheckStageFunctions();
}

void Builder::ResolveDeviceMapping() {
  const int n = num_stages();
  // Resolve the mapping: identity puts every part of stage s on IPU s.
  if (o_.device_mapping.empty()) {
    for (int s = 0; s < n; ++s) {
      part_ipus_.push_back(
          std::vector<int>(o_.computational_stages[s].functions.size(), s));
      logical_mapping_.push_back(s);
    }
  } else {
    for (const StageDevices& d : o_.device_mapping) {
      logical_mapping_.push_back(d.ipus.empty() ? -1 : d.ipus[0]);
    }
    if (o_.device_mapping.size() != o_.computational_stages.size()) {
      mapping_ok_ = false;
    } else {
      for (int s = 0; s < n; ++s) {
        const auto& fns = o_.computational_stages[s].functions;
        const auto& ipus = o_.device_mapping[s].ipus;
        part_ipus_.push_back(ipus);
        if (fns.size() != ipus.size()) {
          mapping_ok_ = false;
          violations_.push_back(absl::StrCat(
              "stage ", s, " has ", fns.size(),
              " concurrent function(s) but device_mapping[", s, "] lists ",
              ipus.size(), " IPU(s): give one IPU per concurrent stage"));
        }
        for (int ipu : ipus) mapping_ok_ &= ipu >= 0;
      }
    }
  }
}

void Builder::CheckInterleavedSharing() {
  const int n = num_stages();
  const bool training = b_->training;
  // Interleaved training: one stage per IPU, concurrent parts included
  // (the logical mapping only sees each stage's first IPU).
  if (!training || !mapping_ok_ ||
      o_.pipeline_schedule != PipelineSchedule::kInterleaved) {
    return;
  }
  std::map<int, int> stage_on;
  for (int s = 0; s < n; ++s) {
    for (size_t p = 1; p < part_ipus_[s].size(); ++p) {
      const int ipu = part_ipus_[s][p];
      auto [it, fresh] = stage_on.insert({ipu, s});
      bool clash = !fresh && it->second != s;
      for (int t = 0; t < n; ++t) clash |= t != s && logical_mapping_[t] == ipu;
      if (clash) {
        violations_.push_back(absl::StrCat(
            "the pipelining schedule 'Interleaved' does not support several "
            "stages on one IPU for training: concurrent stage ",
            s, ".", p, " shares IPU ", ipu,
            " with another stage; use Grouped"));
      }
    }
  }
}

void Builder::CheckScheduleTable() {
  const int n = num_stages();
  const bool training = b_->training;
  const char* schedule = PipelineScheduleName(o_.pipeline_schedule);
  if (!o_.schedule_table.has_value()) {
    if (o_.pipeline_schedule == PipelineSchedule::kCustom) {
      violations_.push_back(
          "pipeline_schedule Custom needs a schedule_table (a ScheduleTable: "
          "hand-written, or from ScheduleTableFromCsv)");
    }
    return;
  }
  const ScheduleTable& t = *o_.schedule_table;
  if (t.kind != o_.pipeline_schedule) {
    violations_.push_back(absl::StrCat(
        "schedule_table is a ", PipelineScheduleName(t.kind),
        " table but pipeline_schedule is ", schedule,
        ": set pipeline_schedule to ", PipelineScheduleName(t.kind)));
  }
  if (t.num_stages != n) {
    violations_.push_back(absl::StrCat("schedule_table has ", t.num_stages,
                                       " stages; computational_stages has ",
                                       n));
  }
  if (t.micro_batches != o_.gradient_accumulation_count) {
    violations_.push_back(
        absl::StrCat("schedule_table has ", t.micro_batches,
                     " micro-batches; gradient_accumulation_count is ",
                     o_.gradient_accumulation_count));
  }
  if (t.training != training) {
    violations_.push_back(absl::StrCat(
        "schedule_table is ", t.training ? "a training" : "an inference",
        " table; the pipeline is ", training ? "a training" : "an inference",
        " pipeline (optimizer_function ", training ? "set" : "empty", ")"));
  }
  if (mapping_ok_ && t.num_stages == n && t.stage_ipu != logical_mapping_) {
    violations_.push_back(absl::StrCat(
        "schedule_table places the stages on IPUs [",
        absl::StrJoin(t.stage_ipu, ", "), "]; device_mapping puts them on [",
        absl::StrJoin(logical_mapping_, ", "), "]"));
  }
  const std::vector<ScheduleViolation> invalid = ValidateScheduleTable(t);
  if (!invalid.empty()) {
    std::string report = ScheduleViolationsToString(t, invalid);
    while (!report.empty() && report.back() == '\n') report.pop_back();
    violations_.push_back(
        absl::StrCat("schedule_table is not valid: ", report));
  }
}

void Builder::CheckRanges() {
  if (o_.repeat_count < 1) {
    violations_.push_back(
        absl::StrCat("repeat_count must be >= 1, got ", o_.repeat_count));
  }
  // Enums, upper bounds and products (core/option_checks.h).
  OptionChecker check("PipelineOptions");
  check.Enum("recomputation_mode", "RecomputationMode", o_.recomputation_mode,
             {{RecomputationMode::kAuto, "Auto"},
              {RecomputationMode::kRecomputeThenBackpropagate,
               "RecomputeThenBackpropagate"},
              {RecomputationMode::kRecomputeAndBackpropagateInterleaved,
               "RecomputeAndBackpropagateInterleaved"}});
  check.Enum("reduction_method", "ReductionMethod", o_.reduction_method,
             {{ReductionMethod::kSum, "Sum"},
              {ReductionMethod::kMean, "Mean"},
              {ReductionMethod::kRunningMean, "RunningMean"}});
  if (o_.repeat_count >= 1 && o_.gradient_accumulation_count >= 1) {
    check.Product(
        {{"repeat_count", o_.repeat_count},
         {"gradient_accumulation_count", o_.gradient_accumulation_count}},
        std::numeric_limits<int>::max(),
        " micro-batches in one run (counted in int)");
  }
  if (o_.accumulate_outfeed && o_.outfeed_queue == nullptr) {
    check.Fail(
        "accumulate_outfeed requires an outfeed_queue (the sum it enqueues "
        "would go nowhere)");
  }
  violations_.insert(violations_.end(), check.messages().begin(),
                     check.messages().end());
}

void Builder::CheckVirtualCosts() {
  const int n = num_stages();
  const bool training = b_->training;
  if (!o_.virtual_costs.has_value()) return;
  const StageCosts& c = *o_.virtual_costs;
  auto bad = [n](const std::vector<double>& v) {
    return static_cast<int>(v.size()) != n ||
           !std::all_of(v.begin(), v.end(),
                        [](double x) { return std::isfinite(x) && x >= 0; });
  };
  if (bad(c.forward) || (training && bad(c.backward))) {
    violations_.push_back(absl::StrCat(
        "virtual_costs needs one finite cost >= 0 per stage for the forward",
        training ? " and the backward" : "", " (", n, " stages)"));
  }
}

void Builder::CheckCombinations() {
  const int n = num_stages();
  const bool training = b_->training;
  if (o_.outfeed_loss && !training) {
    violations_.push_back(
        "outfeed_loss requires an optimizer_function (a training pipeline)");
  }
  if (o_.outfeed_loss && o_.outfeed_queue == nullptr) {
    violations_.push_back("outfeed_loss requires an outfeed_queue");
  }
  if (o_.replicated_optimizer_state_sharding &&
      !o_.offload_weight_update_variables) {
    // The original's text (TensorFlow IPU, ops/op_util.py).
    violations_.push_back(
        "To use replicated_optimizer_state_sharding, optimizer state must be "
        "offloaded by using offload_weight_update_variables.");
  }
  const std::optional<DType> fixed = o_.gradient_accumulation_dtype.fixed();
  if (fixed.has_value() && *fixed != DType::kFloat32 &&
      *fixed != DType::kFloat16) {
    violations_.push_back(absl::StrCat(
        "gradient_accumulation_dtype must be float32 or float16, got ",
        DTypeName(*fixed)));
  }
  const auto mode = o_.recomputation_mode;
  if (mode == RecomputationMode::kRecomputeAndBackpropagateInterleaved &&
      o_.pipeline_schedule == PipelineSchedule::kInterleaved) {
    violations_.push_back(
        "pipeline schedule 'Interleaved' does not support the "
        "'RecomputeAndBackpropagateInterleaved' recomputation mode: use "
        "RecomputeThenBackpropagate or Auto");
  }
  if (mode == RecomputationMode::kRecomputeThenBackpropagate &&
      o_.pipeline_schedule == PipelineSchedule::kSequential) {
    violations_.push_back(
        "pipeline schedule 'Sequential' does not support the "
        "'RecomputeThenBackpropagate' recomputation mode: use "
        "RecomputeAndBackpropagateInterleaved or Auto");
  }
  if (training && n >= 2 &&
      o_.computational_stages.back().functions.size() > 1) {
    violations_.push_back(
        "the last stage of a training pipeline cannot be a list of concurrent "
        "stages: its outputs feed the optimizer_function's loss; add a stage "
        "after it that computes the loss");
  }
}

void Builder::CheckStageFunctions() {
  const int n = num_stages();
  for (int s = 0; s < n; ++s) {
    if (o_.computational_stages[s].functions.empty()) {
      mapping_ok_ = false;
      violations_.push_back(absl::StrCat("stage ", s, " has no function"));
    }
  }
}

}  // namespace ipuflow::pipelining::internal
