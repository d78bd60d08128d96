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

ItemValue Popped(int message, int index) {
  return {ItemValue::From::kPopped, message, index};
}
ItemValue Fetched(int index) { return {ItemValue::From::kFetched, 0, index}; }

// Values [begin, end) of the part's forward fetches.
std::vector<ItemValue> FetchedRange(int begin, int end) {
  std::vector<ItemValue> v;
  for (int i = begin; i < end; ++i) v.push_back(Fetched(i));
  return v;
}

// Counts the push as IPU-to-IPU traffic of `from` when `to` is another IPU.
ItemPushValues Sent(std::vector<ItemValue> values, int from, int to) {
  ItemPushValues push{std::move(values)};
  if (from != to) {
    push.transfer = ItemPushValues::Transfer::kIpuToIpu;
    push.counted_ipu = from;
  }
  return push;
}

// A part's forward item: it pops the element stage 0's first part took
// (the stage's other parts) or the previous stage's parts' outputs, then
// the other last-stage parts' outputs (the part that enqueues); it pushes
// the element on (stage 0's first part), its outputs to the next stage,
// its stash, and its outputs to the part that enqueues.
void LayOutForward(const BuiltPipeline& b, const PipelineLayout& l,
                   const WorkItem& item, const PartProgram& part,
                   WorkListItem* w, ItemProgram* ip) {
  const auto& parts = l.parts;
  const int n = static_cast<int>(parts.size());
  const PartDef& d = *part.def;
  const int s = d.stage, p = d.part;
  const int num_parts = static_cast<int>(parts[s].size());
  const int num_out = static_cast<int>(d.outputs.size());
  const int num_inputs = static_cast<int>(b.options.inputs.size());
  ip->role = part.forward_role;
  const bool takes = s == 0 && !b.infeed_id.empty();
  if (takes && p > 0) w->pops.push_back(Key("infeed", 0, p));
  for (size_t q = 0; s > 0 && q < parts[s - 1].size(); ++q) {
    w->pops.push_back(Key("act", s - 1, q, p));
  }
  for (int i : part.fed_args) {
    if (s == 0) {
      ip->feeds.push_back(
          {{i < num_inputs ? ItemValue{ItemValue::From::kInput, 0, i}
                           : Popped(0, i - num_inputs)}});
      continue;
    }
    const StageDef& prev = b.stages[s - 1];
    int q = 0;
    while (q + 1 < static_cast<int>(prev.output_offset.size()) &&
           i >= prev.output_offset[q + 1]) {
      ++q;
    }
    ip->feeds.push_back({{Popped(q, i - prev.output_offset[q])}});
  }
  const bool to_outfeed = s + 1 == n && b.outfeed_enqueue != nullptr;
  if (to_outfeed && part.enqueues) {
    // The other last-stage parts' outputs, for the OutfeedEnqueue node.
    for (int q = 0; q + 1 < num_parts; ++q) {
      const int message = static_cast<int>(w->pops.size());
      w->pops.push_back(Key("out", s, q));
      for (size_t j = 0; j < parts[s][q].def->outputs.size(); ++j) {
        ip->feeds.push_back({{Popped(message, static_cast<int>(j))}});
      }
    }
  }
  if (part.element_fetch >= 0) {
    // What the InfeedDequeue node took, for the stage's other parts (a
    // hand-over: it does not hold them back on the virtual clock).
    ip->records_taken = true;
    const int end =
        part.element_fetch + static_cast<int>(d.args.size()) - d.dequeued_from;
    for (int q = 1; q < num_parts; ++q) {
      w->pushes.push_back(Key("infeed", 0, q));
      ItemPushValues push{FetchedRange(part.element_fetch, end),
                          /*timed=*/false,
                          ItemPushValues::Transfer::kHostToDevice,
                          parts[0][q].def->ipu};
      ip->pushes.push_back(std::move(push));
    }
  }
  for (size_t q = 0; s + 1 < n && q < parts[s + 1].size(); ++q) {
    w->pushes.push_back(Key("act", s, p, q));
    ip->pushes.push_back(
        Sent(FetchedRange(0, num_out), d.ipu, parts[s + 1][q].def->ipu));
  }
  if (b.training) {
    w->pushes.push_back(Key("stash", s, p));
    ItemPushValues stash;
    for (size_t i = 0; i < part.fed_args.size(); ++i) {
      stash.values.push_back({ItemValue::From::kFed, 0, static_cast<int>(i)});
    }
    for (ItemValue v :
         FetchedRange(num_out, num_out + static_cast<int>(part.stash.size()))) {
      stash.values.push_back(v);
    }
    ip->pushes.push_back(std::move(stash));
  }
  if (to_outfeed && num_parts > 1 && !part.enqueues) {
    w->pushes.push_back(Key("out", s, p));
    ip->pushes.push_back({FetchedRange(0, num_out)});
  }
  // Its micro-batch's values reach the outfeed (accumulated: all of them
  // with the last).
  const int m = item.micro_batch, M = b.table.micro_batches;
  if (to_outfeed && part.enqueues) {
    if (!b.options.accumulate_outfeed) {
      ip->completes = m + 1;
    } else if (m + 1 == M) {
      ip->completes = M;
    }
  }
}

// A part's backward item: it pops its stash and each next-stage part's
// gradients (summed), and pushes each previous-stage part its share of the
// argument gradients.
void LayOutBackward(const BuiltPipeline& b, const PipelineLayout& l,
                    const WorkItem& item, const PartProgram& part,
                    WorkListItem* w, ItemProgram* ip) {
  const auto& parts = l.parts;
  const int n = static_cast<int>(parts.size());
  const PartDef& d = *part.def;
  const int s = d.stage, p = d.part;
  ip->role = part.backward_role;
  w->pops.push_back(Key("stash", s, p));
  const int next = s + 1 < n ? static_cast<int>(parts[s + 1].size()) : 0;
  for (int q = 0; q < next; ++q) w->pops.push_back(Key("grad", s, q, p));
  const int stashed =
      static_cast<int>(part.fed_args.size() + part.stash.size());
  for (int j = 0; j < stashed; ++j) ip->feeds.push_back({{Popped(0, j)}});
  for (int j : part.dy_outputs) {
    ItemFeed dy;
    for (int q = 0; q < next; ++q) dy.terms.push_back(Popped(1 + q, j));
    dy.zeros_dtype = d.outputs[j].dtype();
    dy.zeros_shape = d.outputs[j].shape();
    ip->feeds.push_back(std::move(dy));
  }
  if (!d.accumulate.empty()) {
    // The accumulation's scales are computed from it in the program.
    ip->constants.push_back(Tensor::Scalar<int32_t>(item.micro_batch));
    ip->feeds.push_back({{{ItemValue::From::kConstant, 0, 0}}});
  }
  for (size_t q = 0; s > 0 && q < parts[s - 1].size(); ++q) {
    w->pushes.push_back(Key("grad", s - 1, p, q));
    const PartDef& to = *parts[s - 1][q].def;
    const int off = b.stages[s - 1].output_offset[q];
    std::vector<ItemValue> grads;
    for (int a = off; a < off + static_cast<int>(to.outputs.size()); ++a) {
      auto k = std::find(part.grad_args.begin(), part.grad_args.end(), a);
      grads.push_back(
          k == part.grad_args.end()
              ? ItemValue{}
              : Fetched(static_cast<int>(k - part.grad_args.begin())));
    }
    ip->pushes.push_back(Sent(std::move(grads), d.ipu, to.ipu));
  }
}

// One work-list item per part of each table item, on its IPU's list in
// table order, with the channels it pops and pushes and how its program's
// feeds and its pushes are laid out; the work lists replay the table in
// that order to size every channel to its peak (core/ipu/work_lists.h says
// why that cannot deadlock).
void LayOutLists(const BuiltPipeline& b, PipelineLayout* l) {
  auto work = std::make_shared<WorkListSpec>();
  work->name = absl::StrCat("pipeline '", b.options.name, "'");
  work->lists.assign(l->num_ipus, {});
  const std::optional<StageCosts>& costs = b.options.virtual_costs;
  for (int t = 0; t < b.table.num_steps(); ++t) {
    for (const WorkItem& item : b.table.steps[t]) {
      for (const PartProgram& part : l->parts[item.stage]) {
        const PartDef& d = *part.def;
        const bool forward = item.pass == Pass::kForward;
        WorkListItem w;
        w.ipu = d.ipu;
        w.step = t;
        w.tag = static_cast<int>(l->items.size());
        w.order = w.tag;
        ItemProgram ip;
        ip.iteration = item.micro_batch;
        ip.label = absl::StrCat(d.name, " (IPU ", d.ipu, ") ",
                                forward ? "forward" : "backward",
                                ", micro-batch ", item.micro_batch);
        if (costs.has_value()) {
          ip.cost = (forward ? costs->forward : costs->backward)[item.stage];
        }
        if (forward) {
          LayOutForward(b, *l, item, part, &w, &ip);
        } else {
          LayOutBackward(b, *l, item, part, &w, &ip);
        }
        l->items.push_back({item, d.part});
        work->items.push_back(std::move(ip));
        work->lists[d.ipu].push_back(std::move(w));
      }
    }
  }
  // Stash occupancy at each IPU's step boundaries (stash.h's convention).
  for (auto& list : work->lists) {
    for (size_t i = 0; b.training && i < list.size(); ++i) {
      if (i + 1 < list.size() && list[i + 1].step == list[i].step) continue;
      for (const auto& stage : l->parts) {
        for (const PartProgram& p : stage) {
          if (p.def->ipu != list[i].ipu) continue;
          work->items[list[i].tag].observes.push_back(
              Key("stash", p.def->stage, p.def->part));
        }
      }
    }
  }
  work->lockstep = b.table.kind == PipelineSchedule::kSequential;
  work->iterations = b.table.micro_batches;
  work->repeats = b.options.repeat_count;
  work->num_inputs = static_cast<int>(b.options.inputs.size());
  if (l->offloads) work->epilogue.push_back(kLoadStateRole);
  if (l->has_weight_update) work->epilogue.push_back(kWeightUpdateRole);
  if (l->offloads) work->epilogue.push_back(kStoreStateRole);
  work->modelled_costs = costs.has_value();
  l->capacities = WorkLists::Capacities(work->lists);
  l->work = std::move(work);
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
