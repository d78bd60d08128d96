// The logic of the plan_pipeline command line tool (plan_pipeline.cc is only
// flag parsing around it): validate a pipeline configuration, dry-run its
// schedule with per-stage costs, print the plan, write the timeline files.
//
//   PlanPipelineOptions options;
//   options.schedule = "interleaved";
//   options.stages = 4;
//   options.gradient_accumulation_count = 8;
//   ASSIGN_OR_RETURN(std::string report, RunPlanPipeline(options));
//   std::cout << report;   // "ValidatePipeline: OK\nPipeline plan: ..."
//
// Flag values arrive as the strings the user typed ("0,1,0,1", "1.5"), so
// every parse error names the flag and the offending text.
//
// Thread safety: pure functions, except that RunPlanPipeline writes the
// files named in the options.
#ifndef IPUFLOW_PIPELINING_PLAN_PIPELINE_TOOL_H_
#define IPUFLOW_PIPELINING_PLAN_PIPELINE_TOOL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipelining/planner.h"
#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// One field per flag of plan_pipeline, with the flags' defaults.
struct PlanPipelineOptions {
  // grouped | interleaved | sequential | gpipe | 1f1b | interleaved1f1b |
  // loopedbfs (any case; '-' and '_' ignored).
  std::string schedule = "grouped";
  int stages = 4;
  std::string device_mapping;  // "0,1,2,3"; empty = stage s on IPU s.
  int gradient_accumulation_count = 8;
  bool training = true;
  // Cost of one micro-batch per stage, in any unit (printed as seconds): one
  // value per stage, or a single value for every stage.
  std::string forward_costs = "1";
  std::string backward_costs = "2";  // Ignored in inference.
  // Bytes one micro-batch leaves in each stage's stash (one value for all,
  // or one per stage; empty: no memory prediction). Training only.
  std::string stash_bytes;
  std::string timing = "dataflow";  // dataflow | lockstep (planner.h).
  bool force = false;     // Plan even if ValidatePipeline rejects the setting.
  std::string svg_path;   // Write the SVG timeline here if not empty.
  std::string json_path;  // Write the Chrome trace / Perfetto JSON here.
};

// The options after parsing.
struct PlanPipelineRequest {
  PipelineSchedule schedule = PipelineSchedule::kGrouped;
  int stages = 0;
  std::vector<int> device_mapping;
  int gradient_accumulation_count = 0;
  bool training = true;
  StageCosts costs;
  PlanTiming timing = PlanTiming::kDataflow;
};

// Parses and checks the flag strings. InvalidArgument naming the flag for an
// unknown schedule or timing, a malformed list, or a cost list whose length
// is neither 1 nor --stages. Does NOT apply ValidatePipeline's rules (the
// tool reports those itself, and --force overrides them).
absl::StatusOr<PlanPipelineRequest> ParsePlanPipelineOptions(
    const PlanPipelineOptions& options);

// Validates, plans and writes the files; returns the report to print:
//   "ValidatePipeline: OK" or "ValidatePipeline: <violations>" (with
//   --force), then PlanDebugString, then one "Wrote ..." line per file.
// Returns the parse error; ValidatePipeline's InvalidArgument (with a hint
// to pass --force) when the configuration breaks a rule and !force; the
// planner's error; or the I/O error of a file that cannot be written.
absl::StatusOr<std::string> RunPlanPipeline(const PlanPipelineOptions& options);

// "Grouped training, 4 stages, M = 8, dataflow timing": the SVG title.
std::string PlanTitle(const Plan& plan);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PLAN_PIPELINE_TOOL_H_
