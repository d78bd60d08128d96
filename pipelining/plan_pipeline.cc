// Dry-run planner: validates a pipeline configuration, then predicts its
// timeline, bubble and stash from per-stage costs, without running a model.
//
//   ./bazelw run //pipelining:plan_pipeline -- --schedule=interleaved
//       --stages=4 --gradient_accumulation_count=16
//       --forward_costs=1 --backward_costs=2 --svg=plan.svg --json=plan.json
//   (one command line)
//
// Prints ValidatePipeline's verdict (a violated rule stops the tool unless
// --force is given), then the plan: makespan, utilisation per IPU, bubble
// against (N-1)/(M+N-1), stash depths and occupancy, a text timeline. See
// docs/PIPELINING.md. The logic lives in plan_pipeline_tool.h.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "core/command_line.h"
#include "pipelining/plan_pipeline_tool.h"

using ipuflow::pipelining::PlanPipelineOptions;

ABSL_FLAG(std::string, schedule, PlanPipelineOptions().schedule,
          "grouped, interleaved or sequential");
ABSL_FLAG(int, stages, PlanPipelineOptions().stages, "pipeline stages N");
ABSL_FLAG(std::string, device_mapping, "",
          "IPU of each stage, e.g. 0,1,0,1 (default: stage s on IPU s)");
ABSL_FLAG(int, gradient_accumulation_count,
          PlanPipelineOptions().gradient_accumulation_count,
          "micro-batches M per weight update");
ABSL_FLAG(bool, training, true, "forward and backward (false: inference)");
ABSL_FLAG(std::string, forward_costs, PlanPipelineOptions().forward_costs,
          "forward cost of one micro-batch per stage (any unit, shown as "
          "seconds): one value per stage, or one for all");
ABSL_FLAG(std::string, backward_costs, PlanPipelineOptions().backward_costs,
          "backward cost of one micro-batch per stage, as --forward_costs");
ABSL_FLAG(std::string, stash_bytes, "",
          "bytes one micro-batch leaves in each stage's stash (one value or "
          "one per stage): predicts each IPU's stash memory");
ABSL_FLAG(std::string, timing, PlanPipelineOptions().timing,
          "dataflow (wait for inputs only) or lockstep (steps are barriers)");
ABSL_FLAG(bool, force, false, "plan even if ValidatePipeline rejects it");
ABSL_FLAG(std::string, svg, "", "write the SVG timeline to this path");
ABSL_FLAG(std::string, json, "",
          "write the Chrome trace / Perfetto JSON timeline to this path");

int main(int argc, char** argv) {
  using namespace ipuflow::pipelining;
  absl::SetProgramUsageMessage(
      "Dry-runs a Grouped, Interleaved or Sequential pipeline schedule and "
      "prints its timeline, bubble and stash.");
  ipuflow::ParseCommandLine(argc, argv);
  PlanPipelineOptions options;
  options.schedule = absl::GetFlag(FLAGS_schedule);
  options.stages = absl::GetFlag(FLAGS_stages);
  options.device_mapping = absl::GetFlag(FLAGS_device_mapping);
  options.gradient_accumulation_count =
      absl::GetFlag(FLAGS_gradient_accumulation_count);
  options.training = absl::GetFlag(FLAGS_training);
  options.forward_costs = absl::GetFlag(FLAGS_forward_costs);
  options.backward_costs = absl::GetFlag(FLAGS_backward_costs);
  options.stash_bytes = absl::GetFlag(FLAGS_stash_bytes);
  options.timing = absl::GetFlag(FLAGS_timing);
  options.force = absl::GetFlag(FLAGS_force);
  options.svg_path = ipuflow::ResolveOutputPath(absl::GetFlag(FLAGS_svg));
  options.json_path = ipuflow::ResolveOutputPath(absl::GetFlag(FLAGS_json));

  absl::StatusOr<std::string> report = RunPlanPipeline(options);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    return 1;
  }
  std::fputs(report->c_str(), stdout);
  return 0;
}
