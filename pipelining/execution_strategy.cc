#include "pipelining/execution_strategy.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ipuflow::pipelining {
namespace {

// Builds `blocks` (consecutive blocks of a model) in `scope`: a block that
// is not parallel to the previous one receives the outputs gathered so far.
std::vector<Output> RunBlocks(const std::vector<Block>& blocks,
                              const Scope& scope,
                              const std::vector<Output>& args) {
  std::vector<Output> in = args, out;
  for (size_t k = 0; k < blocks.size(); ++k) {
    if (k > 0 && !blocks[k].parallel) {
      in = std::move(out);
      out.clear();
    }
    const Block& b = blocks[k];
    std::vector<Output> r =
        b.body(scope.NewSubScope(b.name).WithBlock(b.name), in);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

}  // namespace

absl::Status BlockModel::Append(std::string name, StageBody body,
                                std::optional<int> ipu_id, bool parallel) {
  if (name.empty()) name = absl::StrCat(next_auto_id_++);
  if (Find(name) >= 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "Block '", name, "' already exists: block names must be unique"));
  }
  if (!body) {
    return absl::InvalidArgumentError(
        absl::StrCat("Block '", name, "' has no function"));
  }
  if (ipu_id.has_value() && *ipu_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Block '", name, "': ipu_id ", *ipu_id, " is negative"));
  }
  if (parallel && blocks_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AddParallel: block '", name,
        "' is the first block: there is no block to run parallel to"));
  }
  blocks_.push_back({std::move(name), std::move(body), ipu_id, parallel});
  return absl::OkStatus();
}

absl::Status BlockModel::Add(std::string name, StageBody body,
                             std::optional<int> ipu_id) {
  return Append(std::move(name), std::move(body), ipu_id, false);
}

absl::Status BlockModel::AddParallel(std::string name, StageBody body,
                                     std::optional<int> ipu_id) {
  return Append(std::move(name), std::move(body), ipu_id, true);
}

int BlockModel::Find(std::string_view name) const {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<Output> BlockModel::Apply(const Scope& scope,
                                      const std::vector<Output>& args) const {
  return RunBlocks(blocks_, scope, args);
}

ExecutionStrategy::ExecutionStrategy(Kind kind, std::vector<Stage> stages)
    : kind_(kind), stages_(std::move(stages)) {}

ExecutionStrategy::ExecutionStrategy(Kind kind, AutoStage auto_stage)
    : kind_(kind), auto_stage_(auto_stage) {}

ExecutionStrategy::ExecutionStrategy(std::vector<Phase> phases)
    : kind_(Kind::kSerialPhased), phases_(std::move(phases)) {}

const char* ExecutionStrategy::name() const {
  switch (kind_) {
    case Kind::kPipelined:
      return "PipelinedExecution";
    case Kind::kSharded:
      return "ShardedExecution";
    case Kind::kSerialPhased:
      return "SerialPhasedExecution";
  }
  return "?";
}

Stage* ExecutionStrategy::stage(std::string_view block_id) {
  auto holds = [&](const Stage& s) {
    return std::find(s.blocks().begin(), s.blocks().end(), block_id) !=
           s.blocks().end();
  };
  for (Stage& s : stages_) {
    if (holds(s)) return &s;
  }
  for (Phase& p : phases_) {
    for (Stage& s : p.stages()) {
      if (holds(s)) return &s;
    }
  }
  return nullptr;
}

std::vector<int> StrategyPlan::StageIpus() const {
  std::vector<int> ipus;
  for (const auto& concurrent : stages) ipus.push_back(concurrent[0].ipu);
  return ipus;
}

std::string StrategyPlan::ToString() const {
  std::vector<std::string> lines;
  for (size_t s = 0; s < stages.size(); ++s) {
    std::vector<std::string> parts;
    for (const PlannedStage& p : stages[s]) {
      parts.push_back(absl::StrCat("[", absl::StrJoin(p.blocks, ", "), "]",
                                   " on IPU ", p.ipu));
    }
    lines.push_back(
        absl::StrCat("stage ", s, ": ", absl::StrJoin(parts, " | ")));
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status ApplyStrategy(const BlockModel& model,
                           const ExecutionStrategy& strategy,
                           PipelineOptions* options) {
  if (options == nullptr) {
    return absl::InvalidArgumentError("ApplyStrategy: options is null");
  }
  ASSIGN_OR_RETURN(StrategyPlan plan, PlanStrategy(model, strategy));
  options->computational_stages.clear();
  options->device_mapping.clear();
  for (const std::vector<PlannedStage>& concurrent : plan.stages) {
    std::vector<StageFunction> functions;
    std::vector<int> ipus;
    for (const PlannedStage& p : concurrent) {
      std::vector<Block> blocks;
      for (const std::string& name : p.blocks) {
        blocks.push_back(model.blocks()[model.Find(name)]);
      }
      functions.emplace_back(
          [blocks = std::move(blocks)](const Scope& scope,
                                       const std::vector<Output>& args) {
            return RunBlocks(blocks, scope, args);
          });
      ipus.push_back(p.ipu);
    }
    ComputationalStage stage(functions[0]);
    stage.functions = std::move(functions);
    options->computational_stages.push_back(std::move(stage));
    StageDevices devices(ipus[0]);
    devices.ipus = std::move(ipus);
    options->device_mapping.push_back(std::move(devices));
  }
  options->pipeline_schedule = plan.schedule;
  return absl::OkStatus();
}

}  // namespace ipuflow::pipelining
