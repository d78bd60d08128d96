// PlanStrategy: BlockPlacementPlanner, which resolves an ExecutionStrategy
// over a BlockModel's blocks (PopTorch's stage manager): names, automatic
// stages, order, IPUs, parallel blocks kept together, every violation
// collected. The strategies and ApplyStrategy are in execution_strategy.cc.
#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipelining/execution_strategy.h"

namespace ipuflow::pipelining {
namespace {

std::string List(const std::vector<std::string>& names) {
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

}  // namespace

namespace {

// A stage being resolved.
struct Candidate {
  std::vector<std::string> names;
  std::optional<int> ipu;
  int phase = -1;  // SerialPhasedExecution only.
  int index_in_phase = 0;
  std::vector<int> blocks;  // Model indices, sorted (after ResolveNames).
};

// One PlanStrategy call; collects every violation.
class BlockPlacementPlanner {
 public:
  BlockPlacementPlanner(const BlockModel& model,
                        const ExecutionStrategy& strategy);
  absl::StatusOr<StrategyPlan> Plan();

 private:
  bool phased() const {
    return strategy_.kind() == ExecutionStrategy::Kind::kSerialPhased;
  }
  void Collect();
  void AutoStages();
  void ResolveNames();
  void CheckOrder();
  void ResolveIpus();
  // Candidates [begin, end) grouped into computational stages (candidate
  // indices); {} after recording a violation.
  std::vector<std::vector<int>> Units(int begin, int end);
  // Units of all stages; for phases, exactly one per phase.
  std::vector<std::vector<int>> ComputationalStages();
  void SplitError(int c, int group);
  std::string Label(int c) const;
  std::vector<std::string> Names(const std::vector<int>& blocks) const;

  const BlockModel& model_;
  const ExecutionStrategy& strategy_;
  std::vector<int> group_;                    // Block -> its parallel group.
  std::vector<int> group_begin_, group_end_;  // Group -> first, last block.
  std::vector<Candidate> stages_;
  std::vector<std::string> violations_;
};

BlockPlacementPlanner::BlockPlacementPlanner(const BlockModel& model,
                                             const ExecutionStrategy& strategy)
    : model_(model), strategy_(strategy) {
  for (int i = 0; i < model.size(); ++i) {
    if (i == 0 || !model.blocks()[i].parallel) {
      group_begin_.push_back(i);
      group_end_.push_back(i);
    }
    group_.push_back(static_cast<int>(group_begin_.size()) - 1);
    group_end_.back() = i;
  }
}

std::string BlockPlacementPlanner::Label(int c) const {
  const Candidate& s = stages_[c];
  const std::string where =
      phased() ? absl::StrCat("stage ", s.index_in_phase, " of phase ", s.phase)
               : absl::StrCat("stage ", c);
  return absl::StrCat(where, " ", List(s.names));
}

std::vector<std::string> BlockPlacementPlanner::Names(
    const std::vector<int>& blocks) const {
  std::vector<std::string> names;
  for (int b : blocks) names.push_back(model_.blocks()[b].name);
  return names;
}

void BlockPlacementPlanner::Collect() {
  if (!phased()) {
    if (strategy_.stages().empty()) return AutoStages();
    for (const Stage& s : strategy_.stages()) {
      stages_.push_back({s.blocks(), s.ipu()});
    }
    return;
  }
  if (strategy_.phases().empty()) {
    violations_.push_back(
        "There is currently no AutoStage for SerialPhasedExecution, please "
        "explicitly specify the phases");
  }
  for (size_t p = 0; p < strategy_.phases().size(); ++p) {
    const Phase& phase = strategy_.phases()[p];
    const std::vector<Stage>& stages = phase.stages();
    if (stages.empty()) {
      violations_.push_back(absl::StrCat("Phase ", p, " has no stage"));
    }
    const auto& ipus = phase.ipus();
    if (ipus.has_value() && ipus->size() != stages.size()) {
      violations_.push_back(
          absl::StrCat("Phase ", p, " contains ", stages.size(),
                       " stages but you provided ", ipus->size(), " IPUs"));
    }
    for (size_t k = 0; k < stages.size(); ++k) {
      Candidate c{stages[k].blocks(), stages[k].ipu()};
      if (ipus.has_value() && ipus->size() == stages.size()) {
        c.ipu = (*ipus)[k];
      }
      c.phase = static_cast<int>(p);
      c.index_in_phase = static_cast<int>(k);
      stages_.push_back(std::move(c));
    }
  }
}

// PopTorch's _DefaultStageManager, with stages made of runs of blocks.
void BlockPlacementPlanner::AutoStages() {
  const std::vector<Block>& blocks = model_.blocks();
  const bool same_as_ipu = strategy_.auto_stage() == AutoStage::kSameAsIpu;
  if (same_as_ipu) {
    for (const Block& b : blocks) {
      if (b.ipu_id.has_value()) continue;
      violations_.push_back(absl::StrCat(
          "AutoStage.SameAsIpu was selected but no IPU was specified for "
          "block '",
          b.name,
          "': give every block an ipu_id, or use "
          "AutoStage::kAutoIncrement or explicit Stages"));
    }
    if (!violations_.empty()) return;
  }
  std::set<int> used;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    if (i > 0 && b.ipu_id.has_value() && blocks[i - 1].ipu_id == b.ipu_id) {
      stages_.back().names.push_back(b.name);
      continue;
    }
    if (same_as_ipu && !used.insert(*b.ipu_id).second) {
      violations_.push_back(
          absl::StrCat("AutoStage.SameAsIpu: block '", b.name,
                       "' goes back to IPU ", *b.ipu_id, " after block '",
                       blocks[i - 1].name, "' on IPU ", *blocks[i - 1].ipu_id,
                       ", but the stage id is the IPU id: use "
                       "AutoStage::kAutoIncrement or explicit Stages"));
    }
    stages_.push_back({{b.name}, b.ipu_id});
  }
}

void BlockPlacementPlanner::ResolveNames() {
  std::vector<std::string> expected;
  for (const Block& b : model_.blocks()) expected.push_back(b.name);
  std::vector<int> owner(model_.size(), -1);
  for (size_t c = 0; c < stages_.size(); ++c) {
    Candidate& s = stages_[c];
    if (s.names.empty()) {
      violations_.push_back(absl::StrCat(Label(c), " has no block"));
    }
    for (const std::string& name : s.names) {
      const int i = model_.Find(name);
      if (i < 0) {
        violations_.push_back(
            absl::StrCat("Unknown Block '", name,
                         "'; list of expected Blocks: ", List(expected)));
      } else if (owner[i] == static_cast<int>(c)) {
        violations_.push_back(
            absl::StrCat("Block '", name, "' is listed twice in ", Label(c)));
      } else if (owner[i] >= 0) {
        violations_.push_back(absl::StrCat(
            "Block '", name, "' is associated with more than one stage: ",
            Label(owner[i]), " and ", Label(c)));
      } else {
        owner[i] = static_cast<int>(c);
        s.blocks.push_back(i);
      }
    }
    std::sort(s.blocks.begin(), s.blocks.end());
  }
  std::vector<int> missing;
  for (int i = 0; i < model_.size(); ++i) {
    if (owner[i] < 0) missing.push_back(i);
  }
  if (!missing.empty()) {
    violations_.push_back(absl::StrCat(
        missing.size() == 1 ? "Block " : "Blocks ",
        missing.size() == 1 ? absl::StrCat("'", expected[missing[0]], "' is")
                            : absl::StrCat(List(Names(missing)), " are"),
        " in no stage: every block must be in exactly one stage"));
  }
}

void BlockPlacementPlanner::CheckOrder() {
  for (size_t c = 0; c < stages_.size(); ++c) {
    const std::vector<int>& b = stages_[c].blocks;
    for (size_t k = 1; k < b.size(); ++k) {
      if (b[k] == b[k - 1] + 1) continue;
      violations_.push_back(absl::StrCat(
          Label(c), " holds blocks that are not consecutive: the model runs '",
          model_.blocks()[b[k - 1] + 1].name, "' between '",
          model_.blocks()[b[k - 1]].name, "' and '", model_.blocks()[b[k]].name,
          "'"));
      break;
    }
  }
  for (size_t c = 1; c < stages_.size(); ++c) {
    if (stages_[c].blocks.empty() || stages_[c - 1].blocks.empty()) continue;
    if (stages_[c].blocks.front() > stages_[c - 1].blocks.back()) continue;
    violations_.push_back(absl::StrCat(
        Label(c), " comes after ", Label(c - 1),
        ", but the model runs it first: list the stages in model order"));
  }
}

void BlockPlacementPlanner::ResolveIpus() {
  for (size_t c = 0; c < stages_.size(); ++c) {
    Candidate& s = stages_[c];
    if (!s.ipu.has_value()) {
      std::set<int> ipus;
      std::vector<std::string> on;
      for (int i : s.blocks) {
        const Block& b = model_.blocks()[i];
        if (!b.ipu_id.has_value()) continue;
        ipus.insert(*b.ipu_id);
        on.push_back(absl::StrCat(b.name, " on IPU ", *b.ipu_id));
      }
      if (ipus.size() > 1) {
        violations_.push_back(absl::StrCat(
            Label(c), " holds blocks on different IPUs (",
            absl::StrJoin(on, ", "),
            "): set the stage's IPU with Stage::Ipu or split the stage"));
      }
      s.ipu = !ipus.empty()
                  ? *ipus.begin()
                  : (phased() ? s.index_in_phase : static_cast<int>(c));
    }
    if (*s.ipu < 0) {
      violations_.push_back(
          absl::StrCat(Label(c), ": IPU ", *s.ipu, " is negative"));
    }
  }
}

void BlockPlacementPlanner::SplitError(int c, int group) {
  std::vector<int> members;
  for (int i = group_begin_[group]; i <= group_end_[group]; ++i) {
    members.push_back(i);
  }
  violations_.push_back(absl::StrCat(
      Label(c), " splits the parallel blocks ", List(Names(members)),
      ": a stage holds whole parallel groups, or blocks of one group whose "
      "other blocks are in the stages next to it",
      phased() ? " in the same phase" : ""));
}

std::vector<std::vector<int>> BlockPlacementPlanner::Units(int begin, int end) {
  std::vector<std::vector<int>> units;
  int i = begin;
  while (i < end) {
    const int a = stages_[i].blocks.front(), b = stages_[i].blocks.back();
    const int ga = group_[a], gb = group_[b];
    if (group_begin_[ga] == a && group_end_[gb] == b) {
      units.push_back({i++});
      continue;
    }
    if (ga != gb) {
      SplitError(i, group_begin_[ga] != a ? ga : gb);
      return {};
    }
    std::vector<int> unit;
    while (i < end && group_[stages_[i].blocks.front()] == ga &&
           group_[stages_[i].blocks.back()] == ga) {
      unit.push_back(i++);
    }
    if (a != group_begin_[ga] ||
        stages_[unit.back()].blocks.back() != group_end_[ga]) {
      SplitError(a != group_begin_[ga] ? unit.front() : unit.back(), ga);
      return {};
    }
    units.push_back(std::move(unit));
  }
  return units;
}

std::vector<std::vector<int>> BlockPlacementPlanner::ComputationalStages() {
  const int n = static_cast<int>(stages_.size());
  if (!phased()) return Units(0, n);
  // Phase by phase, so that every bad phase is reported.
  std::vector<std::vector<int>> all;
  for (int c = 0, end = 0; c < n; c = end) {
    while (end < n && stages_[end].phase == stages_[c].phase) ++end;
    std::vector<std::vector<int>> u = Units(c, end);
    if (u.size() > 1) {
      violations_.push_back(absl::StrCat(
          "Phase ", stages_[c].phase, " has ", end - c, " stages, but block '",
          model_.blocks()[stages_[u[1][0]].blocks.front()].name,
          "' receives the outputs of block '",
          model_.blocks()[stages_[u[0].back()].blocks.back()].name,
          "': the stages of a phase run in parallel on the same arguments, "
          "so they must hold the blocks of one parallel group "
          "(BlockModel::AddParallel); put dependent blocks in one stage or "
          "in successive phases"));
    }
    all.insert(all.end(), u.begin(), u.end());
  }
  return all;
}

absl::StatusOr<StrategyPlan> BlockPlacementPlanner::Plan() {
  if (model_.size() == 0) {
    violations_.push_back(
        "the model has no blocks: add them with "
        "BlockModel::Add");
  } else {
    Collect();
    if (violations_.empty()) ResolveNames();
    if (violations_.empty()) CheckOrder();
    if (violations_.empty()) ResolveIpus();
  }
  std::vector<std::vector<int>> units;
  if (violations_.empty()) units = ComputationalStages();
  if (!violations_.empty()) {
    std::vector<std::string> names;
    for (const Block& b : model_.blocks()) names.push_back(b.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid execution strategy (", strategy_.name(), ", blocks ",
        List(names), "):\n  ", absl::StrJoin(violations_, "\n  ")));
  }
  StrategyPlan plan;
  plan.schedule = strategy_.kind() == ExecutionStrategy::Kind::kPipelined
                      ? PipelineSchedule::kGrouped
                      : PipelineSchedule::kSequential;
  for (const std::vector<int>& unit : units) {
    std::vector<PlannedStage> concurrent;
    for (int c : unit) {
      concurrent.push_back({Names(stages_[c].blocks), *stages_[c].ipu});
    }
    plan.stages.push_back(std::move(concurrent));
  }
  return plan;
}

}  // namespace

absl::StatusOr<StrategyPlan> PlanStrategy(const BlockModel& model,
                                          const ExecutionStrategy& strategy) {
  return BlockPlacementPlanner(model, strategy).Plan();
}

}  // namespace ipuflow::pipelining
