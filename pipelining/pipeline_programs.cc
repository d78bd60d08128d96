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
    part.takes_element = true;
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

// Values by name (core/ipu/work_list_program.h): a value is its Output's
// name, in a channel as in the program that fetches or is fed it.
ItemValue Input(const Output& o) { return {ItemValue::From::kInput, o.name()}; }
ItemValue Popped(const std::string& channel, const Output& o) {
  return {ItemValue::From::kPopped, o.name(), channel};
}
ItemValue Fed(const Output& o) { return {ItemValue::From::kFed, o.name()}; }
ItemValue Fetched(const Output& o) {
  return {ItemValue::From::kFetched, o.name()};
}

std::vector<ItemValue> FetchedAll(const std::vector<Output>& outputs) {
  std::vector<ItemValue> v;
  for (const Output& o : outputs) v.push_back(Fetched(o));
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

// What an item pops and pushes and where its program's feeds come from.
struct ItemLayout {
  WorkListItem* w;
  ItemProgram* ip;
  void Pop(std::string channel) { w->pops.push_back(std::move(channel)); }
  void Push(std::string channel, ItemPushValues values) {
    w->pushes.push_back(std::move(channel));
    ip->pushes.push_back(std::move(values));
  }
  void Feed(const Output& feed, std::vector<ItemValue> terms) {
    ip->feeds.push_back({feed.name(), std::move(terms)});
  }
};

// A part's forward item, channel by channel:
//   pops  infeed/0/p     stage 0's other parts: the element part 0 took
//         act/s-1/q/p    each previous-stage part q's outputs
//         out/s/q        the part that enqueues: the other last-stage
//                        parts' outputs, for its OutfeedEnqueue node
//   feeds each argument it reads from the run's inputs or what it popped
//   pushes infeed/0/q    stage 0's first part: the element it took
//         act/s/p/q      its outputs, to each next-stage part q
//         stash/s/p      training: its fed arguments and its stash
//         out/s/p        the other last-stage parts: their outputs
void LayOutForward(const BuiltPipeline& b, const PipelineLayout& l,
                   const WorkItem& item, const PartProgram& part,
                   ItemLayout out) {
  const auto& parts = l.parts;
  const int n = static_cast<int>(parts.size());
  const PartDef& d = *part.def;
  const int s = d.stage, p = d.part;
  const int num_parts = static_cast<int>(parts[s].size());
  const int num_inputs = static_cast<int>(b.options.inputs.size());
  out.ip->role = part.forward_role;
  const std::string element = Key("infeed", 0, p);
  const bool takes = s == 0 && !b.infeed_id.empty();
  if (takes && p > 0) out.Pop(element);
  for (int q = 0; s > 0 && q < static_cast<int>(parts[s - 1].size()); ++q) {
    out.Pop(Key("act", s - 1, q, p));
  }
  for (int i : part.fed_args) {
    if (s == 0) {
      // The run's inputs, then the infeed element as part 0 took it.
      out.Feed(d.args[i],
               {i < num_inputs ? Input(b.options.inputs[i])
                               : Popped(element, parts[0][0].def->args[i])});
      continue;
    }
    const StageDef& prev = b.stages[s - 1];
    int q = 0;
    while (q + 1 < static_cast<int>(prev.output_offset.size()) &&
           i >= prev.output_offset[q + 1]) {
      ++q;
    }
    out.Feed(d.args[i],
             {Popped(Key("act", s - 1, q, p),
                     prev.parts[q].outputs[i - prev.output_offset[q]])});
  }
  const bool to_outfeed = s + 1 == n && b.outfeed_enqueue != nullptr;
  if (to_outfeed && part.enqueues) {
    size_t k = 0;
    for (int q = 0; q + 1 < num_parts; ++q) {
      out.Pop(Key("out", s, q));
      for (const Output& o : parts[s][q].def->outputs) {
        out.Feed(d.outfeed_feeds[k++], {Popped(Key("out", s, q), o)});
      }
    }
  }
  if (part.takes_element) {
    // What the InfeedDequeue node took, for the stage's other parts (a
    // hand-over: it does not hold them back on the virtual clock).
    out.ip->records_taken = true;
    const std::vector<Output> taken(d.args.begin() + d.dequeued_from,
                                    d.args.end());
    for (int q = 1; q < num_parts; ++q) {
      out.Push(Key("infeed", 0, q),
               {FetchedAll(taken), /*timed=*/false,
                ItemPushValues::Transfer::kHostToDevice, parts[0][q].def->ipu});
    }
  }
  for (size_t q = 0; s + 1 < n && q < parts[s + 1].size(); ++q) {
    out.Push(Key("act", s, p, q),
             Sent(FetchedAll(d.outputs), d.ipu, parts[s + 1][q].def->ipu));
  }
  if (b.training) {
    ItemPushValues stash;
    for (int i : part.fed_args) stash.values.push_back(Fed(d.args[i]));
    for (const Output& o : part.stash) stash.values.push_back(Fetched(o));
    out.Push(Key("stash", s, p), std::move(stash));
  }
  if (to_outfeed && num_parts > 1 && !part.enqueues) {
    out.Push(Key("out", s, p), {FetchedAll(d.outputs)});
  }
  // Its micro-batch's values reach the outfeed (accumulated: all of them
  // with the last).
  const int m = item.micro_batch, M = b.table.micro_batches;
  if (to_outfeed && part.enqueues) {
    if (!b.options.accumulate_outfeed) {
      out.ip->completes = m + 1;
    } else if (m + 1 == M) {
      out.ip->completes = M;
    }
  }
}

// A part's backward item, channel by channel:
//   pops  stash/s/p      what its forward stashed
//   pops  grad/s/q/p     each next-stage part q's gradients of its outputs
//   feeds its fed arguments and stash from the stash; each output's dy,
//         the sum of the next-stage parts' gradients of it (zeros when
//         none has one); the micro-batch index, a constant
//   pushes grad/s-1/p/q  to each previous-stage part q, the gradients of
//                        q's outputs it has
void LayOutBackward(const BuiltPipeline& b, const PipelineLayout& l,
                    const WorkItem& item, const PartProgram& part,
                    ItemLayout out) {
  const auto& parts = l.parts;
  const int n = static_cast<int>(parts.size());
  const PartDef& d = *part.def;
  const int s = d.stage, p = d.part;
  out.ip->role = part.backward_role;
  const std::string stash = Key("stash", s, p);
  out.Pop(stash);
  const int next = s + 1 < n ? static_cast<int>(parts[s + 1].size()) : 0;
  for (int q = 0; q < next; ++q) out.Pop(Key("grad", s, q, p));
  // The gradient part `by` computed of its argument `arg`, if any.
  auto grad = [](const PartProgram& by, int arg) -> const Output* {
    const bool has = std::find(by.grad_args.begin(), by.grad_args.end(), arg) !=
                     by.grad_args.end();
    return has ? &by.def->grad_args[arg] : nullptr;
  };
  if (!part.backward_role.empty()) {
    for (int i : part.fed_args) out.Feed(d.args[i], {Popped(stash, d.args[i])});
    for (const Output& o : part.stash) out.Feed(o, {Popped(stash, o)});
    const int off = b.stages[s].output_offset[p];
    for (int j : part.dy_outputs) {
      ItemFeed dy{d.grad_outputs[j].name()};
      for (int q = 0; q < next; ++q) {
        const Output* g = grad(parts[s + 1][q], off + j);
        if (g != nullptr) dy.terms.push_back(Popped(Key("grad", s, q, p), *g));
      }
      dy.zeros_dtype = d.outputs[j].dtype();
      dy.zeros_shape = d.outputs[j].shape();
      out.ip->feeds.push_back(std::move(dy));
    }
    if (!d.accumulate.empty()) {
      // The accumulation's scales are computed from it in the program.
      const std::string mb = d.micro_batch.name();
      out.ip->constants[mb] = Tensor::Scalar<int32_t>(item.micro_batch);
      out.Feed(d.micro_batch, {{ItemValue::From::kConstant, mb}});
    }
  }
  for (size_t q = 0; s > 0 && q < parts[s - 1].size(); ++q) {
    const PartDef& to = *parts[s - 1][q].def;
    const int off = b.stages[s - 1].output_offset[q];
    std::vector<ItemValue> grads;
    for (int a = off; a < off + static_cast<int>(to.outputs.size()); ++a) {
      if (const Output* g = grad(part, a)) grads.push_back(Fetched(*g));
    }
    out.Push(Key("grad", s - 1, p, q), Sent(std::move(grads), d.ipu, to.ipu));
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
          LayOutForward(b, *l, item, part, {&w, &ip});
        } else {
          LayOutBackward(b, *l, item, part, {&w, &ip});
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
  for (const Output& o : b.options.inputs) work->inputs.push_back(o.name());
  for (const auto& stage : l->parts) {
    for (const PartProgram& p : stage) {
      work->programs[p.forward_role] = {p.forward_spec.feeds,
                                        p.forward_spec.fetches};
      if (!p.backward_role.empty()) {
        work->programs[p.backward_role] = {p.backward_spec.feeds,
                                           p.backward_spec.fetches};
      }
    }
  }
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
