// PipelineRuntime, lowering: the layout's work lists on the replica's
// IPUs and the IPUs' run environments. Running is in pipeline_runtime.cc;
// the programs are the frame node's sub-programs (pipeline_programs.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ipu/device_program.h"
#include "core/ipu/ipu_device.h"
#include "pipelining/pipeline_runtime.h"

namespace ipuflow::pipelining {

using internal::Key;

PipelineRuntime::~PipelineRuntime() = default;

absl::StatusOr<std::unique_ptr<PipelineRuntime>> PipelineRuntime::Create(
    const BuiltPipeline* built, std::shared_ptr<const PipelineLayout> layout,
    IPUSystem* system, Replica replica, std::vector<IpuMemory> memory) {
  std::unique_ptr<PipelineRuntime> rt(new PipelineRuntime());
  rt->b_ = built;
  rt->layout_ = std::move(layout);
  rt->system_ = system;
  rt->replica_ = replica;
  rt->generation_ = system->generation();
  rt->memory_ = std::move(memory);
  RETURN_IF_ERROR(rt->Init());
  return rt;
}

absl::Status PipelineRuntime::Init() {
  num_ipus_ = layout_->num_ipus;
  if (system_->num_ipus() < (replica_.index + 1) * num_ipus_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pipeline '", b_->options.name, "' maps stages to ", num_ipus_,
        " IPUs but the system has ", system_->num_ipus(),
        ": configure auto_select_ipus >= ", num_ipus_));
  }
  memory_.resize(std::max<size_t>(memory_.size(), num_ipus_));
  recompute_ = layout_->recompute;
  envs_.clear();
  for (int k = 0; k < num_ipus_; ++k) {
    envs_.push_back(IpuRunEnv(*system_, replica_.index * num_ipus_ + k,
                              replica_.index, replica_.count, replica_.group));
  }
  // Only the weight update spans IPUs (a stage's nodes are all on its IPU:
  // its env needs no hook): each IPU updates its own variables, at the same
  // time as the others where the update's edges allow. Its per-IPU CPU
  // time feeds the virtual clocks.
  update_hop_cpu_.assign(num_ipus_, 0);
  update_env_ = envs_[0];
  PostToShards(&envs_, &update_hop_cpu_, &update_env_);
  parts_.clear();
  for (const auto& stage : layout_->parts) {
    parts_.emplace_back();
    for (const PartProgram& p : stage) {
      Part part;
      static_cast<PartProgram&>(part) = p;
      parts_.back().push_back(std::move(part));
    }
  }
  entries_ = &layout_->items;
  std::vector<IPUDevice*> devices;
  for (int k = 0; k < num_ipus_; ++k) devices.push_back(&Device(k));
  lists_ = std::make_unique<WorkLists>(
      std::move(devices), layout_->lists,
      /*lockstep=*/b_->table.kind == PipelineSchedule::kSequential);
  lists_->SizeChannels();
  for (auto& stage : parts_) {
    for (Part& p : stage) {
      if (b_->training) {
        p.stash_fifo = Fifo(Key("stash", p.def->stage, p.def->part));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PipelineRuntime::BindPrograms(SubPrograms& programs) {
  // Compiled for this layout: the spec each program was compiled from.
  auto find = [&](const std::string& role,
                  const ProgramSpec& spec) -> absl::StatusOr<Program*> {
    Program* p = programs.Find(role);
    if (p == nullptr || p->spec().fetches.size() != spec.fetches.size() ||
        p->spec().feeds.size() != spec.feeds.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pipeline '", b_->options.name, "': its ", role,
          " program was not compiled for this lowering (compile the frame "
          "with the system that runs it)"));
    }
    return p;
  };
  for (auto& stage : parts_) {
    for (Part& p : stage) {
      ASSIGN_OR_RETURN(p.forward, find(p.forward_role, p.forward_spec));
      p.backward = nullptr;
      if (!p.backward_role.empty()) {
        ASSIGN_OR_RETURN(p.backward, find(p.backward_role, p.backward_spec));
      }
    }
  }
  weight_update_ = load_state_ = store_state_ = nullptr;
  if (layout_->has_weight_update) {
    ASSIGN_OR_RETURN(weight_update_,
                     find(kWeightUpdateRole, layout_->weight_update));
  }
  if (layout_->offloads) {
    ASSIGN_OR_RETURN(load_state_, find(kLoadStateRole, layout_->load_state));
    ASSIGN_OR_RETURN(store_state_, find(kStoreStateRole, layout_->store_state));
  }
  return absl::OkStatus();
}

}  // namespace ipuflow::pipelining
