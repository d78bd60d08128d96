#include "core/ipu/remote_state.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_device.h"
#include "core/resource.h"

namespace ipuflow {

absl::StatusOr<Tensor> ShardToRemote(CollectiveGroup* group, int replica,
                                     int replicas, const std::string& key,
                                     const Tensor& full) {
  const int64_t chunk = (full.NumElements() + replicas - 1) / replicas;
  Tensor shard(full.dtype(), TensorShape({chunk}));
  RETURN_IF_ERROR(group->ReduceScatter(replica, key, full, shard,
                                       CollectiveGroup::ReduceOp::kLocal));
  return shard;
}

absl::StatusOr<Tensor> GatherFromRemote(CollectiveGroup* group, int replica,
                                        int replicas, const std::string& key,
                                        const Tensor& shard,
                                        const TensorShape& shape) {
  Tensor all(shard.dtype(), TensorShape({shard.NumElements() * replicas}));
  RETURN_IF_ERROR(group->AllGather(replica, key, shard, all));
  Tensor full(shard.dtype(), shape);
  std::memcpy(full.raw_data(), all.raw_data(), full.TotalBytes());
  return full;
}

Tensor ChunkInPlace(const Tensor& chunk, int replica,
                    const TensorShape& shape) {
  Tensor full(chunk.dtype(), shape);
  const int64_t n = shape.num_elements();
  const size_t esize = DTypeSize(chunk.dtype());
  const int64_t c = chunk.NumElements();
  const int64_t begin = std::min(n, replica * c);
  const int64_t end = std::min(n, begin + c);
  char* dst = static_cast<char*>(full.raw_data());
  std::memset(dst, 0, full.TotalBytes());
  std::memcpy(dst + begin * esize, chunk.raw_data(), (end - begin) * esize);
  return full;
}

void RemoteState::AddVariable(int update, const Node* variable,
                              const std::string& var_name) {
  for (const Candidate& c : candidates_) {
    if (c.node == variable) return;
  }
  candidates_.push_back({update, variable, var_name,
                         variable->attr<TensorShape>("shape"),
                         variable->attr<DType>("dtype")});
}

void RemoteState::ShardUpdate(int update, int64_t elements) {
  shardable_[update] = elements;
}

absl::Status RemoteState::Plan(IPUSystem* system, int replicas,
                               CollectiveGroup* group,
                               std::vector<IpuMemory>* ipus) {
  const bool explicit_off = options_.offload_weight_update_variables == false;
  const bool rts = options_.replicated_optimizer_state_sharding;
  // Shards are over the global replicas (every process's,
  // docs/DISTRIBUTED.md); `replicas` are this process's.
  const int shards = group != nullptr ? group->num_replicas() : replicas;
  if (rts && explicit_off) {  // The original's ValueError, also at build.
    return absl::InvalidArgumentError(absl::StrCat(
        name_,
        ": To use replicated_optimizer_state_sharding, optimizer state must "
        "be offloaded by using offload_weight_update_variables."));
  }
  // Sharding assumes every replica holds the same optimizer state, which
  // only replica-identical updates guarantee.
  if (rts && shards > 1 && !options_.replica_identical) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": replicated_optimizer_state_sharding over ", shards,
        " replicas needs replica-identical optimizer state: ",
        options_.replica_identical_fix));
  }
  // The listed variables this program holds, by IPU.
  struct Held {
    const Candidate* c;
    size_t ipu;
  };
  std::vector<Held> held;
  for (const Candidate& c : candidates_) {
    for (size_t k = 0; k < ipus->size(); ++k) {
      const auto& vars = (*ipus)[k].variables;
      if (std::any_of(vars.begin(), vars.end(),
                      [&](const auto& v) { return v.first == c.node; })) {
        held.push_back({&c, k});
        break;
      }
    }
  }
  // Automatic: offload with sharding, or when an IPU is over its budget
  // with the state on it.
  bool offload = options_.offload_weight_update_variables.value_or(rts);
  if (!options_.offload_weight_update_variables.has_value() && !offload) {
    for (size_t k = 0; k < ipus->size(); ++k) {
      offload |= (*ipus)[k].total() > system->device(k).memory_budget_bytes();
    }
  }
  auto lowering = std::make_shared<Lowering>();
  lowering->replicas = replicas;
  lowering->shards = shards;
  lowering->ipus_per_replica = static_cast<int>(ipus->size());
  const int64_t min_remote = system->config().minimum_remote_tensor_size();
  for (const Held& h : held) {
    const Candidate& c = *h.c;
    const StatePlacement p = PlaceOptimizerState(
        c.shape.num_elements(), c.dtype, offload, rts, shards, min_remote);
    IpuMemory& m = (*ipus)[h.ipu];
    m.offload |= offload;
    if (!p.remote) continue;  // Stays counted as optimizer state.
    m.optimizer_state -= p.bytes;
    CountOptimizerState(p, shards, &m);
    // Not always-live on the IPU any more: out of the report's "largest"
    // list too (it stayed there at full size, issue 22).
    auto& vars = m.variables;
    vars.erase(std::remove_if(vars.begin(), vars.end(),
                              [&](const auto& v) { return v.first == c.node; }),
               vars.end());
    lowering->by_update[c.update].push_back(
        {c.name, c.shape, p.sharded, static_cast<int>(h.ipu)});
  }
  // An update runs sharded when all its state of the weight's size is
  // sharded (a tensor kept whole on the IPU would go stale outside the
  // chunk); state of other sizes (Adam's step) stays whole.
  for (const auto& [update, elements] : shardable_) {
    bool any = false, all = true;
    for (const Held& h : held) {
      if (h.c->update != update || h.c->shape.num_elements() != elements) {
        continue;
      }
      const auto& placed = lowering->by_update[update];
      const bool sharded = std::any_of(
          placed.begin(), placed.end(),
          [&](const Placed& p) { return p.name == h.c->name && p.sharded; });
      any |= sharded;
      all &= sharded;
    }
    if (any && all && shards > 1) {
      lowering->sharded_updates[update] = elements;
    }
  }
  MutexLock l(&mu_);
  lowerings_[group] = std::move(lowering);
  return absl::OkStatus();
}

void RemoteState::Release(CollectiveGroup* group) {
  MutexLock l(&mu_);
  lowerings_.erase(group);
}

std::shared_ptr<RemoteState::Lowering> RemoteState::Find(
    CollectiveGroup* group) const {
  MutexLock l(&mu_);
  auto it = lowerings_.find(group);
  return it == lowerings_.end() ? nullptr : it->second;
}

const std::vector<RemoteState::Placed>* RemoteState::PlacedFor(
    const RunEnv& env, int update, std::shared_ptr<Lowering>* lowering) const {
  *lowering = Find(env.collectives);
  if (*lowering == nullptr) return nullptr;
  auto placed = (*lowering)->by_update.find(update);
  return placed == (*lowering)->by_update.end() ? nullptr : &placed->second;
}

void RemoteState::CountRemote(const RunEnv& env, int64_t bytes) {
  if (env.device == nullptr) return;
  env.device->counters().remote_memory.fetch_add(bytes,
                                                 std::memory_order_relaxed);
}

absl::Status RemoteState::Load(const RunEnv& env, int update) {
  std::shared_ptr<Lowering> lw;
  const std::vector<Placed>* placed = PlacedFor(env, update, &lw);
  if (placed == nullptr) return absl::OkStatus();
  for (const Placed& p : *placed) {
    std::shared_ptr<VariableResource> v = env.resources->FindVariable(p.name);
    if (v == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          name_, ": optimizer state '", p.name, "' does not exist on IPU ",
          env.ipu, ": initialise the variables before running"));
    }
    Tensor stored;
    bool found = false;
    {
      MutexLock l(&remote_mu_);
      auto it = remote_.find({env.ipu, p.name});
      if (it != remote_.end()) {
        stored = std::move(it->second);
        remote_.erase(it);
        found = true;
      }
    }
    // Before the first store the state is on the IPU; every replica agrees
    // (they run the same program), so the collective below meets.
    if (!found) continue;
    CountRemote(env, stored.TotalBytes());
    if (p.sharded && Chunked(*lw, update, p)) {
      // A sharded update reads only this replica's chunk: no all-gather.
      if (v->initialized()) continue;
      RETURN_IF_ERROR(v->Assign(ChunkInPlace(
          stored, env.collectives->global_replica(env.replica), p.shape)));
      continue;
    }
    if (p.sharded) {
      ASSIGN_OR_RETURN(
          stored, GatherFromRemote(env.collectives, env.replica, lw->shards,
                                   "rts/load/" + p.name, stored, p.shape));
    }
    // Assigned since the store (initialised again): the IPU's is newer.
    if (v->initialized()) continue;
    RETURN_IF_ERROR(v->Assign(stored));
  }
  return absl::OkStatus();
}

bool RemoteState::Chunked(const Lowering& lw, int update, const Placed& p) {
  auto it = lw.sharded_updates.find(update);
  return it != lw.sharded_updates.end() && it->second == p.shape.num_elements();
}

std::pair<int, int> RemoteState::UpdateShardOf(const RunEnv& env,
                                               int update) const {
  std::shared_ptr<Lowering> lw = Find(env.collectives);
  if (lw == nullptr || lw->sharded_updates.count(update) == 0) return {0, 1};
  return {env.collectives->global_replica(env.replica), lw->shards};
}

absl::Status RemoteState::Store(const RunEnv& env, int update) {
  std::shared_ptr<Lowering> lw;
  const std::vector<Placed>* placed = PlacedFor(env, update, &lw);
  if (placed == nullptr) return absl::OkStatus();
  for (const Placed& p : *placed) {
    std::shared_ptr<VariableResource> v = env.resources->FindVariable(p.name);
    if (v == nullptr || !v->initialized()) continue;
    Tensor t = v->Release();
    if (p.sharded) {
      ASSIGN_OR_RETURN(t, ShardToRemote(env.collectives, env.replica,
                                        lw->shards, "rts/store/" + p.name, t));
    }
    CountRemote(env, t.TotalBytes());
    MutexLock l(&remote_mu_);
    remote_[{env.ipu, p.name}] = std::move(t);
  }
  return absl::OkStatus();
}

std::optional<Tensor> RemoteState::OffloadedValue(
    CollectiveGroup* group, int replica, const std::string& name) const {
  std::shared_ptr<Lowering> lw = Find(group);
  if (lw == nullptr || replica < 0 || replica >= lw->replicas) {
    return std::nullopt;
  }
  for (const auto& [update, placed] : lw->by_update) {
    for (const Placed& p : placed) {
      if (p.name != name) continue;
      auto ipu = [&](int r) { return r * lw->ipus_per_replica + p.shard; };
      MutexLock l(&remote_mu_);
      auto it = remote_.find({ipu(replica), name});
      if (it == remote_.end()) return std::nullopt;
      if (!p.sharded) return it->second;
      // The other processes' shards are theirs.
      if (lw->shards != lw->replicas) return std::nullopt;
      // The replicas' shards in rank order, without the padding.
      Tensor full(it->second.dtype(), p.shape);
      const int64_t chunk = static_cast<int64_t>(it->second.TotalBytes());
      const int64_t total = static_cast<int64_t>(full.TotalBytes());
      int64_t at = 0;
      for (int r = 0; r < lw->replicas && at < total; ++r) {
        auto s = remote_.find({ipu(r), name});
        if (s == remote_.end()) return std::nullopt;
        const int64_t n = std::min(chunk, total - at);
        std::memcpy(static_cast<char*>(full.raw_data()) + at,
                    s->second.raw_data(), n);
        at += n;
      }
      return full;
    }
  }
  return std::nullopt;
}

}  // namespace ipuflow
