#include "pipelining/plan_pipeline_tool.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/status.h"
#include "pipelining/trace.h"
#include "pipelining/validation.h"

namespace ipuflow::pipelining {
namespace {

absl::StatusOr<PipelineSchedule> ParseSchedule(const std::string& text) {
  absl::StatusOr<PipelineSchedule> schedule = PipelineScheduleFromName(text);
  if (!schedule.ok() || *schedule == PipelineSchedule::kCustom) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--schedule=%s is not a schedule: use grouped, interleaved, "
        "sequential, gpipe, 1f1b, interleaved1f1b or loopedbfs",
        text));
  }
  return *schedule;
}

absl::StatusOr<PlanTiming> ParseTiming(const std::string& text) {
  const std::string name = absl::AsciiStrToLower(text);
  if (name == "dataflow") return PlanTiming::kDataflow;
  if (name == "lockstep") return PlanTiming::kLockstep;
  return absl::InvalidArgumentError(absl::StrFormat(
      "--timing=%s is not a timing model: use dataflow or lockstep", text));
}

// "1, 2,3" -> {"1", "2", "3"}; an empty element is an error.
absl::StatusOr<std::vector<std::string>> SplitList(const char* flag,
                                                   const std::string& text) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s has an empty element: write comma-separated numbers such "
          "as 1,1,2,2",
          flag, text));
    }
    parts.emplace_back(part);
  }
  return parts;
}

absl::StatusOr<std::vector<int>> ParseMapping(const std::string& text) {
  std::vector<int> mapping;
  if (absl::StripAsciiWhitespace(text).empty()) return mapping;
  ASSIGN_OR_RETURN(std::vector<std::string> parts,
                   SplitList("device_mapping", text));
  for (const std::string& part : parts) {
    int ipu = 0;
    if (!absl::SimpleAtoi(part, &ipu)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--device_mapping=%s: '%s' is not an IPU index (one integer per "
          "stage, e.g. 0,1,2,3)",
          text, part));
    }
    mapping.push_back(ipu);
  }
  return mapping;
}

// One value per stage, or one value for all `stages`.
absl::StatusOr<std::vector<double>> ParseCosts(const char* flag,
                                               const std::string& text,
                                               int stages) {
  ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitList(flag, text));
  std::vector<double> costs;
  for (const std::string& part : parts) {
    double cost = 0;
    if (!absl::SimpleAtod(part, &cost)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s=%s: '%s' is not a number (cost of one micro-batch on one "
          "stage)",
          flag, text, part));
    }
    costs.push_back(cost);
  }
  const int n = std::max(stages, 0);
  if (costs.size() == 1) return std::vector<double>(n, costs[0]);
  if (static_cast<int>(costs.size()) != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s=%s has %d values for %d stages (--stages): give one per stage "
        "or a single value for all",
        flag, text, costs.size(), stages));
  }
  return costs;
}

absl::Status WriteTextFile(const char* flag, const std::string& path,
                           const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("--", flag, "=", path, ": cannot create"));
  }
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;  // Flushes: may fail too.
  if (!wrote || !closed) {
    return absl::ErrnoToStatus(
        wrote ? errno : write_errno,
        absl::StrCat("--", flag, "=", path, ": cannot write"));
  }
  return absl::OkStatus();
}

// "ValidatePipeline: OK", or the violations (only reached with --force).
absl::StatusOr<std::string> ValidationReport(const PlanPipelineRequest& r,
                                             bool force) {
  const absl::Status valid =
      ValidatePipeline(r.schedule, r.stages, r.device_mapping,
                       r.gradient_accumulation_count, r.training);
  if (valid.ok()) return std::string("ValidatePipeline: OK\n");
  if (!force) {
    return absl::InvalidArgumentError(absl::StrCat(
        valid.message(), "\n(pass --force to plan this configuration anyway)"));
  }
  return absl::StrCat("ValidatePipeline: ", valid.message(),
                      "\n  --force: planning it anyway\n");
}

}  // namespace

absl::StatusOr<PlanPipelineRequest> ParsePlanPipelineOptions(
    const PlanPipelineOptions& options) {
  PlanPipelineRequest request;
  ASSIGN_OR_RETURN(request.schedule, ParseSchedule(options.schedule));
  ASSIGN_OR_RETURN(request.timing, ParseTiming(options.timing));
  ASSIGN_OR_RETURN(request.device_mapping,
                   ParseMapping(options.device_mapping));
  request.stages = options.stages;
  request.gradient_accumulation_count = options.gradient_accumulation_count;
  request.training = options.training;
  ASSIGN_OR_RETURN(
      request.costs.forward,
      ParseCosts("forward_costs", options.forward_costs, options.stages));
  if (options.training) {
    ASSIGN_OR_RETURN(
        request.costs.backward,
        ParseCosts("backward_costs", options.backward_costs, options.stages));
    if (!options.stash_bytes.empty()) {
      ASSIGN_OR_RETURN(
          std::vector<double> bytes,
          ParseCosts("stash_bytes", options.stash_bytes, options.stages));
      for (double b : bytes) {
        request.costs.stash_bytes.push_back(static_cast<int64_t>(b));
      }
    }
  }
  return request;
}

absl::StatusOr<std::string> RunPlanPipeline(
    const PlanPipelineOptions& options) {
  ASSIGN_OR_RETURN(PlanPipelineRequest r, ParsePlanPipelineOptions(options));
  ASSIGN_OR_RETURN(std::string report, ValidationReport(r, options.force));
  ASSIGN_OR_RETURN(ScheduleTable table,
                   MakeSchedule(r.schedule, r.stages, r.device_mapping,
                                r.gradient_accumulation_count, r.training));
  ASSIGN_OR_RETURN(Plan plan, PlanSchedule(table, r.costs, r.timing));
  absl::StrAppend(&report, PlanDebugString(plan));
  if (!options.svg_path.empty()) {
    SvgOptions svg;
    svg.title = PlanTitle(plan);
    RETURN_IF_ERROR(
        WriteTextFile("svg", options.svg_path, ToSvgTimeline(plan.items, svg)));
    absl::StrAppend(&report, "Wrote SVG timeline to ", options.svg_path, "\n");
  }
  if (!options.json_path.empty()) {
    RETURN_IF_ERROR(
        WriteTextFile("json", options.json_path,
                      ToChromeTraceJson(plan.items, PlanTitle(plan))));
    absl::StrAppend(&report, "Wrote Chrome trace to ", options.json_path,
                    " (open it in ui.perfetto.dev)\n");
  }
  return report;
}

std::string PlanTitle(const Plan& plan) {
  const ScheduleTable& t = plan.table;
  return absl::StrFormat(
      "%s %s, %d stages, M = %d, %s timing: makespan %s, bubble %.1f%%",
      PipelineScheduleName(t.kind), t.training ? "training" : "inference",
      t.num_stages, t.micro_batches,
      plan.timing == PlanTiming::kDataflow ? "dataflow" : "lockstep",
      HumanSeconds(plan.makespan), 100 * plan.bubble);
}

}  // namespace ipuflow::pipelining
