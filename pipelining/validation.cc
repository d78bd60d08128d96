#include "pipelining/validation.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/option_checks.h"
#include "pipelining/schedule_internal.h"

namespace ipuflow::pipelining {
namespace {

bool MappingIsUsable(int num_stages, const std::vector<int>& mapping) {
  if (static_cast<int>(mapping.size()) != num_stages) return false;
  for (int ipu : mapping) {
    if (ipu < 0) return false;
  }
  return true;
}

std::vector<int> ResolvedOrIdentity(int num_stages,
                                    const std::vector<int>& mapping) {
  if (MappingIsUsable(num_stages, mapping)) return mapping;
  std::vector<int> identity(num_stages);
  for (int s = 0; s < num_stages; ++s) identity[s] = s;
  return identity;
}

bool HasSharedIpu(const std::vector<int>& mapping) {
  std::map<int, int> count;
  for (int ipu : mapping) {
    if (++count[ipu] > 1) return true;
  }
  return false;
}

// Graphcore's CircularUnion (pipeline_visitor_utils.h): greedily keeps the
// rotations of the device sequence that never put one device in the same
// time slot as an already kept rotation.
int CircularUnionSize(const std::vector<int>& sequence) {
  const int len = static_cast<int>(sequence.size());
  std::vector<int> kept = {0};
  for (int offset = 1; offset < len; ++offset) {
    bool clash = false;
    for (int k : kept) {
      for (int j = 0; j < len && !clash; ++j) {
        clash = sequence[(j + offset) % len] == sequence[(j + k) % len];
      }
      if (clash) break;
    }
    if (!clash) kept.push_back(offset);
  }
  return static_cast<int>(kept.size());
}

// The GAC rule's violation line, or "" if `gac` is fine.
std::string GacViolation(PipelineSchedule schedule, int num_stages,
                         const std::vector<int>& mapping, int gac,
                         bool training) {
  const int minimum = MinimumGradientAccumulationCount(schedule, num_stages);
  if (gac >= minimum) return "";
  const std::string mode = absl::StrCat(PipelineScheduleName(schedule),
                                        training ? " training" : " inference");
  if (schedule != PipelineSchedule::kGrouped &&
      schedule != PipelineSchedule::kInterleaved &&
      schedule != PipelineSchedule::k1F1B) {
    return absl::StrFormat(
        "gradient_accumulation_count %d must be at least 1 (%s): use 1 or "
        "more",
        gac, mode);
  }
  if (schedule == PipelineSchedule::k1F1B) {
    // torch.distributed.pipelining's rule and text (Schedule1F1B).
    return absl::StrFormat(
        "gradient_accumulation_count %d is smaller than the %d stages (%s): "
        "torch.distributed.pipelining's Schedule1F1B refuses it (\"Number of "
        "microbatches (%d) must be greater than or equal to the number of "
        "stages (%d).\"); use at least %d, or GPipe",
        gac, num_stages, mode, gac, num_stages, num_stages);
  }
  const int overlap = OverlapLength(schedule, num_stages, mapping, training);
  return absl::StrFormat(
      "gradient_accumulation_count %d is smaller than the %d stages (%s): the "
      "pipeline would never have every IPU busy; use at least %d (%d, a "
      "multiple of the overlap length, also runs on Graphcore's port)",
      gac, num_stages, mode, minimum,
      std::max(overlap, (minimum + overlap - 1) / overlap * overlap));
}

// "IPU 0 has stages 0 and 3" for every IPU with more than one stage.
std::string SharedIpus(const std::vector<int>& mapping) {
  std::map<int, std::vector<int>> stages_of;
  for (int s = 0; s < static_cast<int>(mapping.size()); ++s) {
    stages_of[mapping[s]].push_back(s);
  }
  std::vector<std::string> parts;
  for (const auto& [ipu, stages] : stages_of) {
    if (stages.size() < 2) continue;
    parts.push_back(absl::StrFormat("IPU %d has stages %s", ipu,
                                    absl::StrJoin(stages, ", ")));
  }
  return absl::StrJoin(parts, "; ");
}

std::string Identity(int num_stages) {
  return absl::StrJoin(ResolvedOrIdentity(num_stages, {}), ", ");
}

// Rules 2 and 3 (see the header).
void CheckMapping(PipelineSchedule schedule, int num_stages,
                  const std::vector<int>& mapping, bool training,
                  std::vector<std::string>& violations) {
  if (mapping.empty()) return;
  if (static_cast<int>(mapping.size()) != num_stages) {
    violations.push_back(absl::StrFormat(
        "device_mapping [%s] has %d entries for %d stages: map each stage to "
        "one IPU, e.g. [%s]",
        absl::StrJoin(mapping, ", "), mapping.size(), num_stages,
        Identity(num_stages)));
  }
  for (int s = 0; s < static_cast<int>(mapping.size()); ++s) {
    if (mapping[s] < 0 || mapping[s] >= kMaxPipelineIpus) {
      violations.push_back(absl::StrFormat(
          "device_mapping[%d] = %d is not an IPU index (it must be between 0 "
          "and %d)",
          s, mapping[s], kMaxPipelineIpus - 1));
    }
  }
  // torch's placements (one stage per IPU, the looped one) and its rounds
  // rule, on a usable mapping.
  const bool usable = std::all_of(mapping.begin(), mapping.end(), [](int ipu) {
    return ipu >= 0 && ipu < kMaxPipelineIpus;
  });
  if (schedule != PipelineSchedule::kCustom && usable &&
      (schedule == PipelineSchedule::kGPipe ||
       schedule == PipelineSchedule::k1F1B || IsLoopedSchedule(schedule)) &&
      static_cast<int>(mapping.size()) == num_stages) {
    // (The rounds rule needs the count: PipelineViolations checks it.)
    absl::Status placed = internal::CheckTorchSchedule(
        schedule, mapping,
        schedule == PipelineSchedule::kInterleaved1F1B ? num_stages : 1);
    if (!placed.ok()) violations.push_back(std::string(placed.message()));
  }
  if (schedule == PipelineSchedule::kInterleaved && training &&
      HasSharedIpu(mapping)) {
    violations.push_back(absl::StrFormat(
        "Interleaved training cannot run several stages on one IPU (%s in "
        "device_mapping [%s]): use PipelineSchedule::kGrouped, or one IPU per "
        "stage such as [%s]",
        SharedIpus(mapping), absl::StrJoin(mapping, ", "),
        Identity(num_stages)));
  }
}

}  // namespace

int MinimumGradientAccumulationCount(PipelineSchedule schedule,
                                     int num_stages) {
  switch (schedule) {
    case PipelineSchedule::kGrouped:
    case PipelineSchedule::kInterleaved:
    case PipelineSchedule::k1F1B:
      return num_stages;
    case PipelineSchedule::kSequential:
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::kInterleaved1F1B:
    case PipelineSchedule::kLoopedBFS:
    case PipelineSchedule::kCustom:
      break;
  }
  return 1;
}

int OverlapLength(PipelineSchedule schedule, int num_stages,
                  const std::vector<int>& device_mapping, bool training) {
  switch (schedule) {
    case PipelineSchedule::kGrouped:
      return training ? 2 * num_stages : num_stages;
    case PipelineSchedule::kInterleaved:
      break;
    case PipelineSchedule::kSequential:
    case PipelineSchedule::kGPipe:
    case PipelineSchedule::k1F1B:
    case PipelineSchedule::kInterleaved1F1B:
    case PipelineSchedule::kLoopedBFS:
    case PipelineSchedule::kCustom:
      return 1;
  }
  // Graphcore's scheduler works on the sequence of pipeline-stage devices:
  // forward stages, then (training) backward stages in reverse.
  std::vector<int> sequence = ResolvedOrIdentity(num_stages, device_mapping);
  if (training) {
    sequence.insert(sequence.end(), sequence.rbegin(), sequence.rend());
  }
  return CircularUnionSize(sequence);
}

std::vector<std::string> PipelineViolations(
    PipelineSchedule schedule, int num_stages,
    const std::vector<int>& device_mapping, int gradient_accumulation_count,
    bool training) {
  std::vector<std::string> violations;
  if (num_stages < 2) {
    violations.push_back(absl::StrFormat(
        "a pipeline needs at least two stages, got %d: split the model in "
        "two or more stages, or run it without pipelining",
        num_stages));
  }
  // Upper bounds, the enum and the table's size (checked arithmetic).
  OptionChecker check("PipelineOptions");
  check.EnumValue("pipeline_schedule", "PipelineSchedule",
                  static_cast<int64_t>(schedule), PipelineScheduleEnumValues());
  // (The lower bounds are rules 1 and 4, with their hints.)
  if (num_stages > kMaxScheduleItems) {
    check.Range("num_stages", num_stages, 2, kMaxScheduleItems);
  }
  if (num_stages >= 1 && gradient_accumulation_count > kMaxScheduleItems) {
    check.Range("gradient_accumulation_count", gradient_accumulation_count,
                MinimumGradientAccumulationCount(schedule, num_stages),
                kMaxScheduleItems);
  }
  if (check.ok() && num_stages >= 1 && gradient_accumulation_count >= 1) {
    check.Product(
        {{"passes", training ? 2 : 1},
         {"stages", num_stages},
         {"gradient_accumulation_count", gradient_accumulation_count}},
        kMaxScheduleItems, " work items in one run's schedule");
  }
  violations.insert(violations.end(), check.messages().begin(),
                    check.messages().end());
  if (num_stages >= 1) {
    CheckMapping(schedule, num_stages, device_mapping, training, violations);
    const std::string gac = GacViolation(schedule, num_stages, device_mapping,
                                         gradient_accumulation_count, training);
    if (!gac.empty()) violations.push_back(gac);
    // torch's rounds rule (ScheduleInterleaved1F1B) on the looped mapping.
    const std::vector<int> resolved =
        ResolvedOrIdentity(num_stages, device_mapping);
    if (schedule == PipelineSchedule::kInterleaved1F1B &&
        gradient_accumulation_count >= 1 &&
        gradient_accumulation_count <= kMaxScheduleItems &&
        internal::CheckTorchSchedule(schedule, resolved, num_stages).ok()) {
      absl::Status rounds = internal::CheckTorchSchedule(
          schedule, resolved, gradient_accumulation_count);
      if (!rounds.ok()) violations.push_back(std::string(rounds.message()));
    }
  }
  return violations;
}

absl::Status InvalidPipelineError(PipelineSchedule schedule, int num_stages,
                                  const std::vector<int>& device_mapping,
                                  int gradient_accumulation_count,
                                  bool training,
                                  const std::vector<std::string>& violations) {
  if (violations.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "Invalid pipeline (%s %s, %d stages, device_mapping %s, "
      "gradient_accumulation_count %d):\n  %s",
      PipelineScheduleName(schedule), training ? "training" : "inference",
      num_stages,
      device_mapping.empty()
          ? "identity"
          : absl::StrCat("[", absl::StrJoin(device_mapping, ", "), "]"),
      gradient_accumulation_count, absl::StrJoin(violations, "\n  ")));
}

absl::Status ValidatePipeline(PipelineSchedule schedule, int num_stages,
                              const std::vector<int>& device_mapping,
                              int gradient_accumulation_count, bool training) {
  return InvalidPipelineError(
      schedule, num_stages, device_mapping, gradient_accumulation_count,
      training,
      PipelineViolations(schedule, num_stages, device_mapping,
                         gradient_accumulation_count, training));
}

}  // namespace ipuflow::pipelining
