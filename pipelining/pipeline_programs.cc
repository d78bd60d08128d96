#include "pipelining/pipeline_programs.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_system.h"

namespace ipuflow::pipelining {
namespace internal {

int64_t Bytes(const Output& o) {
  return o.shape().num_elements() * static_cast<int64_t>(DTypeSize(o.dtype()));
}

std::string Key(const char* kind, int a, int b, int c) {
  return absl::StrCat(kind, "/", a, "/", b, "/", c);
}

}  // namespace internal

using internal::Bytes;
using internal::Key;

namespace {

void Feed(const Output& o, ProgramSpec* spec) {
  spec->feeds.push_back(o);
  spec->feed_shapes.push_back(o.shape());
}

PartProgram LayOutPart(const BuiltPipeline& b, const PartDef& d,
                       bool recompute) {
  PartProgram part;
  part.def = &d;
  part.forward_role = d.name + " forward";
  const bool last = d.stage + 1 == static_cast<int>(b.stages.size());
  ProgramSpec& fwd = part.forward_spec;
  for (size_t i = 0; i < d.args.size(); ++i) {
    const bool dequeued =
        d.dequeued_from >= 0 && static_cast<int>(i) >= d.dequeued_from;
    if (!d.arg_used[i] || dequeued) continue;
    part.fed_args.push_back(static_cast<int>(i));
    Feed(d.args[i], &fwd);
  }
  fwd.fetches = d.outputs;
  for (const Output& o : d.outputs) {
    part.output_bytes += Bytes(o);
    if (IsDifferentiable(o.dtype())) part.grad_bytes += Bytes(o);
  }
  if (b.training) {
    part.stash = recompute ? d.stash_recompute : d.stash;
    fwd.fetches.insert(fwd.fetches.end(), part.stash.begin(), part.stash.end());
    for (int i : part.fed_args) part.stash_bytes += Bytes(d.args[i]);
    for (const Output& o : part.stash) part.stash_bytes += Bytes(o);
    if (last) fwd.fetches.push_back(b.loss);
  }
  if (d.dequeued_from >= 0) {
    // The element its InfeedDequeue node took: for the stage's other parts
    // and, should the run stop before its results are out, the infeed.
    part.element_fetch = static_cast<int>(fwd.fetches.size());
    fwd.fetches.insert(fwd.fetches.end(), d.args.begin() + d.dequeued_from,
                       d.args.end());
  }
  part.enqueues = b.outfeed_enqueue != nullptr && last &&
                  d.part + 1 == static_cast<int>(b.stages.back().parts.size());
  if (part.enqueues) {
    for (const Output& o : d.outfeed_feeds) Feed(o, &fwd);
    fwd.targets.push_back(b.outfeed_enqueue);
  }
  if (!b.training || !d.has_backward) return part;
  part.backward_role = d.name + " backward";
  ProgramSpec& bwd = part.backward_spec;
  for (int i : part.fed_args) Feed(d.args[i], &bwd);
  for (const Output& o : part.stash) Feed(o, &bwd);
  for (size_t j = 0; j < d.grad_outputs.size(); ++j) {
    if (!d.grad_outputs[j].valid()) continue;
    part.dy_outputs.push_back(static_cast<int>(j));
    Feed(d.grad_outputs[j], &bwd);
  }
  if (!d.accumulate.empty()) Feed(d.micro_batch, &bwd);
  for (size_t i = 0; i < d.grad_args.size(); ++i) {
    if (!d.grad_args[i].valid()) continue;
    part.grad_args.push_back(static_cast<int>(i));
    bwd.fetches.push_back(d.grad_args[i]);
  }
  bwd.targets = d.accumulate;
  return part;
}

// One work-list item per part of each table item, on its IPU's list in
// table order, with the channels it pops and pushes; the work lists replay
// the table in that order to size every channel to its peak
// (core/ipu/work_lists.h says why that cannot deadlock).
void LayOutLists(const BuiltPipeline& b, PipelineLayout* l) {
  const auto& parts = l->parts;
  const int n = static_cast<int>(parts.size());
  l->lists.assign(l->num_ipus, {});
  for (int t = 0; t < b.table.num_steps(); ++t) {
    for (const WorkItem& item : b.table.steps[t]) {
      const int s = item.stage;
      const int num_parts = static_cast<int>(parts[s].size());
      for (int p = 0; p < num_parts; ++p) {
        const PartProgram& part = parts[s][p];
        PartItem e{item, part.def->part, t, part.def->ipu};
        WorkListItem w;
        w.ipu = e.ipu;
        w.step = t;
        w.tag = static_cast<int>(l->items.size());
        w.order = w.tag;
        if (item.pass == Pass::kForward) {
          // Stage 0's first part reads the infeed and hands the element on.
          if (s == 0 && !b.infeed_id.empty()) {
            if (p == 0) {
              for (int q = 1; q < num_parts; ++q) {
                w.pushes.push_back(Key("infeed", 0, q));
              }
            } else {
              w.pops.push_back(Key("infeed", 0, p));
            }
          }
          for (size_t q = 0; s > 0 && q < parts[s - 1].size(); ++q) {
            w.pops.push_back(Key("act", s - 1, q, p));
          }
          for (size_t q = 0; s + 1 < n && q < parts[s + 1].size(); ++q) {
            w.pushes.push_back(Key("act", s, p, q));
          }
          if (b.training) w.pushes.push_back(Key("stash", s, p));
          // The last stage's other parts send their outputs to the part
          // that enqueues.
          if (s + 1 == n && b.outfeed_enqueue != nullptr && num_parts > 1) {
            if (part.enqueues) {
              for (int q = 0; q + 1 < num_parts; ++q) {
                w.pops.push_back(Key("out", s, q));
              }
            } else {
              w.pushes.push_back(Key("out", s, p));
            }
          }
        } else {
          w.pops.push_back(Key("stash", s, p));
          for (size_t q = 0; s + 1 < n && q < parts[s + 1].size(); ++q) {
            w.pops.push_back(Key("grad", s, q, p));
          }
          for (size_t q = 0; s > 0 && q < parts[s - 1].size(); ++q) {
            w.pushes.push_back(Key("grad", s - 1, p, q));
          }
        }
        l->items.push_back(e);
        l->lists[e.ipu].push_back(std::move(w));
      }
    }
  }
  for (auto& list : l->lists) {
    for (size_t i = 0; i < list.size(); ++i) {
      l->items[list[i].tag].ends_step =
          i + 1 == list.size() || list[i + 1].step != list[i].step;
    }
  }
  l->capacities = WorkLists::Capacities(l->lists);
}

// What part `p` holds on its IPU between its programs' runs: its stash and
// its incoming FIFOs (they live on the receiver) at capacity.
std::pair<int64_t, int64_t> HeldBytes(const BuiltPipeline& b,
                                      const PipelineLayout& l,
                                      const PartProgram& p) {
  const auto& parts = l.parts;
  const int n = static_cast<int>(parts.size());
  auto cap = [&](const std::string& key) -> int64_t {
    auto it = l.capacities.find(key);
    return it == l.capacities.end() ? 0 : it->second;
  };
  const int s = p.def->stage, q = p.def->part;
  int64_t stash = 0, fifos = 0;
  if (b.training) stash = cap(Key("stash", s, q)) * p.stash_bytes;
  for (size_t i = 0; s > 0 && i < parts[s - 1].size(); ++i) {
    const PartProgram& prev = parts[s - 1][i];
    fifos += cap(Key("act", s - 1, prev.def->part, q)) * prev.output_bytes;
  }
  for (size_t i = 0; b.training && s + 1 < n && i < parts[s + 1].size(); ++i) {
    fifos += cap(Key("grad", s, parts[s + 1][i].def->part, q)) * p.grad_bytes;
  }
  // The other last-stage parts' outputs, for the OutfeedEnqueue node.
  for (int i = 0; p.enqueues && i + 1 < static_cast<int>(parts[s].size());
       ++i) {
    fifos += cap(Key("out", s, i)) * parts[s][i].output_bytes;
  }
  return {stash, fifos};
}

}  // namespace

absl::StatusOr<std::shared_ptr<const PipelineLayout>> LayOut(
    const BuiltPipeline& b, bool recompute) {
  auto l = std::make_shared<PipelineLayout>();
  l->recompute = b.training && recompute;
  for (const StageDef& s : b.stages) {
    for (const PartDef& p : s.parts) {
      if (p.ipu < 0 || p.ipu >= kMaxIpus) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline '", b.options.name, "': ", p.name, " is placed on IPU ",
            p.ipu, "; IPUs are numbered 0 to ", kMaxIpus - 1));
      }
      l->num_ipus = std::max(l->num_ipus, p.ipu + 1);
    }
  }
  l->parts.resize(b.stages.size());
  for (size_t s = 0; s < b.stages.size(); ++s) {
    for (const PartDef& d : b.stages[s].parts) {
      l->parts[s].push_back(LayOutPart(b, d, l->recompute));
    }
  }
  if (b.training) {
    l->has_weight_update = true;
    l->weight_update.targets = b.weight_update;
    for (const BuiltPipeline::WeightShard& w : b.weight_shards) {
      l->weight_update.feeds.push_back(w.shard);
      l->weight_update.feed_shapes.push_back(TensorShape({2}));
      l->load_state.fetches.push_back(w.shard);
    }
    l->offloads = b.offloaded_state != nullptr;
    l->load_state.targets = b.offload_loads;
    l->store_state.targets = b.offload_stores;
  }
  LayOutLists(b, l.get());
  return std::shared_ptr<const PipelineLayout>(std::move(l));
}

std::vector<SubProgramSpec> SubProgramSpecs(const BuiltPipeline& b,
                                            const PipelineLayout& l) {
  std::vector<SubProgramSpec> specs;
  for (const auto& stage : l.parts) {
    for (const PartProgram& p : stage) {
      SubProgramSpec fwd{p.forward_role, p.forward_spec, /*own_ipus=*/true};
      fwd.held_shard = p.def->ipu;
      std::tie(fwd.held_stash_bytes, fwd.held_fifo_bytes) = HeldBytes(b, l, p);
      specs.push_back(std::move(fwd));
      if (!p.backward_role.empty()) {
        specs.push_back({p.backward_role, p.backward_spec, true});
      }
    }
  }
  if (l.offloads) specs.push_back({kLoadStateRole, l.load_state, true});
  if (l.has_weight_update) {
    specs.push_back({kWeightUpdateRole, l.weight_update, true});
  }
  if (l.offloads) specs.push_back({kStoreStateRole, l.store_state, true});
  return specs;
}

}  // namespace ipuflow::pipelining
