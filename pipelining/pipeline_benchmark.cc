// Measures (after one warm-up call) pipelined training of a balanced model
// (every stage the same dense layers) on the emulated IPUs: per schedule and
// gradient_accumulation_count, the bubble measured on the virtual clocks
// next to the dry-run planner's prediction from the measured stage costs and
// the textbook (N-1)/(M+N-1), each IPU's utilisation, and the wall clock.
//
//   ./bazelw run //pipelining:pipeline_benchmark
//   ./bazelw run //pipelining:pipeline_benchmark -- --stages=4 --counts=10,40
//       --runs=3 --width=512 --layers=2 --batch=32
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/command_line.h"
#include "core/ipu/ipu_strategy.h"
#include "feeds/dataset.h"
#include "pipelining/balanced_model.h"
#include "pipelining/pipeline.h"
#include "pipelining/trace.h"

ABSL_FLAG(int, stages, 4, "pipeline stages (one IPU each)");
ABSL_FLAG(std::string, counts, "10,40", "gradient_accumulation_count values");
ABSL_FLAG(std::string, schedules, "grouped,interleaved,sequential",
          "schedules to measure");
ABSL_FLAG(int, runs, 3, "pipeline runs (repeat_count) per measurement");
ABSL_FLAG(int, width, 384, "units of each dense layer");
ABSL_FLAG(int, layers, 2, "dense layers per stage");
ABSL_FLAG(int, batch, 32, "micro-batch size");
ABSL_FLAG(std::string, svg_dir, "",
          "write each measured timeline (virtual clocks) there as "
          "<schedule>_<M>.svg");

namespace ipuflow::pipelining {
namespace {

struct Row {
  std::string schedule;
  int m = 0;
  PipelineReport report;
};

absl::StatusOr<PipelineReport> Measure(PipelineSchedule kind, int n, int m) {
  const int width = absl::GetFlag(FLAGS_width);
  const int layers = absl::GetFlag(FLAGS_layers);
  const int batch = absl::GetFlag(FLAGS_batch);
  const int runs = absl::GetFlag(FLAGS_runs);
  IPUConfig config;
  config.set_auto_select_ipus(n);
  ASSIGN_OR_RETURN(std::unique_ptr<IPUSystem> system,
                   IPUSystem::Create(config));
  IPUStrategy strategy(system.get());
  Scope scope = Scope::NewRootScope();
  Tensor x(DType::kFloat32, {static_cast<int64_t>(m) * runs * batch, width});
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    x.data<float>()[i] = static_cast<float>((i * 7919) % 1000) / 1000 - 0.5f;
  }
  ASSIGN_OR_RETURN(
      auto infeed,
      feeds::IPUInfeedQueue::Create(
          feeds::FromTensorSlices({x})->Batch(batch, true)->Repeat(), 8));
  PipelineOptions o;
  for (int s = 0; s < n; ++s) {
    o.computational_stages.push_back(DenseTanhStage(s, width, layers));
  }
  o.gradient_accumulation_count = m;
  o.repeat_count = runs;
  o.infeed_queue = infeed.get();
  o.pipeline_schedule = kind;
  o.optimizer_function = MeanSquareSgd(0.01f);
  ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(scope, o));
  RETURN_IF_ERROR(strategy.Initialize(*scope.graph()));
  // The first call compiles and warms up (first-touch of every arena and
  // buffer); the second is measured.
  ASSIGN_OR_RETURN(DeviceProgram * exe,
                   strategy.Compile(*scope.graph(), {}, {pipeline->frame()}));
  std::vector<std::vector<Tensor>> results;
  RETURN_IF_ERROR(exe->Execute({{}}, &results));
  RETURN_IF_ERROR(exe->Execute({{}}, &results));
  return *pipeline->last_report();
}

int Main() {
  const int n = absl::GetFlag(FLAGS_stages);
  std::vector<Row> rows;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_schedules), ',')) {
    // GPipe and 1F1B run here (one stage per IPU); the looped schedules
    // need a looped device_mapping this benchmark does not build.
    absl::StatusOr<PipelineSchedule> parsed = PipelineScheduleFromName(name);
    if (!parsed.ok()) {
      std::fprintf(stderr, "--schedules: %s\n",
                   std::string(parsed.status().message()).c_str());
      return 1;
    }
    const PipelineSchedule kind = *parsed;
    for (absl::string_view count :
         absl::StrSplit(absl::GetFlag(FLAGS_counts), ',')) {
      int m = 0;
      if (!absl::SimpleAtoi(count, &m)) {
        std::fprintf(stderr, "--counts: '%s' is not a number\n",
                     std::string(count).c_str());
        return 1;
      }
      absl::StatusOr<PipelineReport> r = Measure(kind, n, m);
      if (!r.ok()) {
        std::fprintf(stderr, "%s M=%d: %s\n", std::string(name).c_str(), m,
                     r.status().ToString().c_str());
        return 1;
      }
      rows.push_back({PipelineScheduleName(kind), m, *r});
      const std::string dir = ResolveOutputPath(absl::GetFlag(FLAGS_svg_dir));
      if (!dir.empty()) {
        SvgOptions svg;
        svg.title = absl::StrFormat(
            "Measured: %s training, %d stages, M = %d, %d runs (virtual "
            "clocks)",
            PipelineScheduleName(kind), n, m, r->repeats);
        const std::string path = absl::StrCat(
            dir, "/", absl::AsciiStrToLower(PipelineScheduleName(kind)), "_", m,
            ".svg");
        std::ofstream(path) << ToSvgTimeline(r->items, svg);
      }
    }
  }
  std::printf(
      "%d balanced stages (%d x dense %d + tanh, batch %d), training, %d runs "
      "each; virtual clocks (per-IPU thread CPU time)\n\n",
      n, absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_width),
      absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_runs));
  std::printf(
      "| schedule | M | bubble measured | planned | theory | IPU "
      "utilisation | virtual s/run | wall s/run |\n|---|---|---|---|---|"
      "---|---|---|\n");
  for (const Row& row : rows) {
    const PipelineReport& r = row.report;
    std::vector<std::string> util;
    for (double u : r.ipu_utilisation)
      util.push_back(absl::StrFormat("%.0f%%", 100 * u));
    std::printf("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %s | %.4f | %.4f |\n",
                row.schedule.c_str(), row.m, 100 * r.bubble,
                100 * r.planned_bubble, 100 * r.theoretical_bubble,
                absl::StrJoin(util, " ").c_str(), r.measured_seconds_per_run,
                r.wall_seconds / r.repeats);
  }
  return 0;
}

}  // namespace
}  // namespace ipuflow::pipelining

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures pipeline bubble and utilisation against the planner and "
      "theory.");
  ipuflow::ParseCommandLine(argc, argv);
  return ipuflow::pipelining::Main();
}
