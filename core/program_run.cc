// Program::Run and its Executor: one run of a compiled program, in schedule
// order, in parallel over the inter-op pool, or shard by shard.
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/floating_point_traps.h"
#include "core/hash_mix.h"
#include "core/mutex.h"
#include "core/program.h"
#include "core/program_internal.h"

namespace ipuflow {
namespace {

thread_local int run_depth = 0;

}  // namespace

using program_internal::NestingGuard;

// One run's state. Values are written by their producer before any consumer
// starts (ordered by the pending counters' acquire/release) and released by
// their last consumer.
class Program::Executor {
 public:
  // Uses the program's run buffers: runs are never concurrent, and reusing
  // them keeps a run (a loop iteration) free of allocations.
  Executor(Program* p, RunEnv* env, uint64_t run_stream)
      : p_(p),
        env_(env),
        run_stream_(run_stream),
        values_(p->run_values_),
        uses_(p->run_uses_.get()),
        pending_(p->run_pending_.get()) {
    for (int v = 0; v < p->num_values_; ++v) {
      uses_[v].store(p->value_uses_[v], std::memory_order_relaxed);
    }
    for (size_t i = 0; i < p->nodes_.size(); ++i) {
      pending_[i].store(p->nodes_[i]->num_predecessors,
                        std::memory_order_relaxed);
    }
  }

  std::vector<Tensor>& values() { return values_; }

  // In schedule order. With env.on_shard set (a sharded device program),
  // each run of consecutive nodes of one shard executes on that shard's
  // IPU, with its env; one IPU is busy at a time, as in sharded execution.
  absl::Status RunSequential() {
    const int n = static_cast<int>(p_->nodes_.size());
    for (int pos = 0; pos < n;) {
      const int shard = p_->nodes_[pos]->shard;
      int end = pos + 1;
      while (end < n && p_->nodes_[end]->shard == shard) ++end;
      absl::Status s;
      auto run = [&](RunEnv& env) {
        for (int i = pos; i < end && s.ok(); ++i) s = RunNode(i, &env);
      };
      if (env_->on_shard && shard != 0) {
        env_->on_shard(shard, run);
      } else {
        run(*env_);
      }
      RETURN_IF_ERROR(s);
      pos = end;
    }
    return absl::OkStatus();
  }

  // With env.post_to_shard: each of the program's shard runs on its IPU
  // (shard 0 on the calling thread) as soon as the runs it waits for are
  // done, so IPUs with independent work run at once. Runs start in
  // schedule order; after an error no further run starts, and the error of
  // the earliest failing run is returned once every started run has ended.
  absl::Status RunShards() {
    const std::vector<ShardRun>& runs = p_->shard_runs_;
    std::vector<char> done(runs.size(), 0);
    int in_flight = 0;
    int failed = -1;
    absl::Status status;
    for (int r = 0; r < static_cast<int>(runs.size()); ++r) {
      {
        MutexLock l(&mu_);
        done_cv_.Await(&mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          if (failed >= 0) return true;
          for (int a : runs[r].after) {
            if (!done[a]) return false;
          }
          return true;
        });
        if (failed >= 0) break;
        ++in_flight;
      }
      auto s = std::make_shared<absl::Status>();
      auto work = [this, r, s, &runs](RunEnv& env) {
        for (int i = runs[r].begin; i < runs[r].end && s->ok(); ++i) {
          *s = RunNode(i, &env);
        }
      };
      auto finish = [this, r, s, &done, &in_flight, &failed, &status] {
        MutexLock l(&mu_);
        if (!s->ok() && (failed < 0 || r < failed)) {
          failed = r;
          status = *s;
        }
        done[r] = 1;
        --in_flight;
        done_cv_.SignalAll();
      };
      if (runs[r].shard == 0) {
        work(*env_);
        finish();
      } else {
        env_->post_to_shard(runs[r].shard, work, finish);
      }
    }
    MutexLock l(&mu_);
    done_cv_.Await(
        &mu_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return in_flight == 0; });
    return status;
  }

  absl::Status RunParallel() {
    remaining_.store(static_cast<int>(p_->nodes_.size()));
    if (p_->nodes_.empty()) return absl::OkStatus();
    std::vector<int> ready = p_->initial_ready_;
    for (size_t i = 1; i < ready.size(); ++i) {
      const int pos = ready[i];
      env_->inter_op->Schedule([this, pos] { Process(pos); });
    }
    Process(ready[0]);
    MutexLock l(&mu_);
    done_cv_.Await(
        &mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return finished_; });
    return status_;
  }

 private:
  absl::Status RunNode(int pos, RunEnv* env) {
    ExecNode& en = *p_->nodes_[pos];
    KernelContext::Inputs inputs;
    for (int v : en.inputs) inputs.push_back(&values_[v]);
    // data() + offset, not &values_[offset]: a node without outputs may
    // have first_output == values_.size().
    KernelContext ctx(en.node, std::move(inputs),
                      values_.data() + en.first_output, env, &en.state,
                      &en.plans, &p_->arena_);
    ctx.replica_identical_ = en.replica_identical;
    ctx.run_stream_ = run_stream_;
    ctx.fused_ = en.fused.get();
    absl::Status s;
    if (p_->profiling_) {
      const auto start = std::chrono::steady_clock::now();
      s = (*en.kernel)(ctx);
      const std::chrono::duration<double> d =
          std::chrono::steady_clock::now() - start;
      if (en.fused != nullptr && p_->profile_[pos].runs == 0) {
        std::string ops;
        for (const Node* c : en.fused->nodes) {
          absl::StrAppend(&ops, ops.empty() ? "" : "+", c->op());
        }
        p_->profile_[pos].op = ops;
      }
      ++p_->profile_[pos].runs;
      p_->profile_[pos].seconds += d.count();
      p_->profile_[pos].samples.push_back(static_cast<float>(d.count()));
    } else {
      s = (*en.kernel)(ctx);
    }
    // Traps look at the inputs too: before they are released. Zero cost
    // when every trap is off.
    const FloatingPointBehaviour* fp = env->floating_point;
    if (s.ok() && fp != nullptr && fp->any_trap()) {
      s = CheckFloatingPointTraps(*fp, ctx);
    }
    for (int v : en.inputs) {
      if (uses_[v].fetch_sub(1, std::memory_order_acq_rel) == 1)
        values_[v] = Tensor();
    }
    if (!s.ok()) {
      // Errors name the node that failed (kernels that report through
      // ctx.InvalidArgument already do).
      if (absl::StrContains(s.message(), en.node->name())) return s;
      return absl::Status(
          s.code(), absl::StrCat(en.node->DebugName(), ": ", s.message()));
    }
    for (int k = 0; k < en.node->num_outputs(); ++k) {
      if (!values_[en.first_output + k].valid()) {
        return absl::InternalError(absl::StrCat(
            en.node->DebugName(), ": kernel did not produce output ", k));
      }
      if (uses_[en.first_output + k].load(std::memory_order_relaxed) == 0) {
        values_[en.first_output + k] = Tensor();  // Nobody reads it.
      }
    }
    return absl::OkStatus();
  }

  // Runs `pos`, then the successors it makes ready: the first inline, the
  // rest on the inter-op pool.
  void Process(int pos) {
    while (pos >= 0) {
      if (!aborted_.load(std::memory_order_acquire)) {
        absl::Status s = RunNode(pos, env_);
        if (!s.ok()) {
          MutexLock l(&mu_);
          if (status_.ok()) status_ = s;
          aborted_.store(true, std::memory_order_release);
        }
      }
      int next = -1;
      for (int succ : p_->nodes_[pos]->successors) {
        if (pending_[succ].fetch_sub(1, std::memory_order_acq_rel) == 1) {
          if (next < 0) {
            next = succ;
          } else {
            env_->inter_op->Schedule([this, succ] { Process(succ); });
          }
        }
      }
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        MutexLock l(&mu_);
        finished_ = true;
        done_cv_.SignalAll();
      }
      pos = next;
    }
  }

  Program* p_;
  RunEnv* env_;
  const uint64_t run_stream_;  // KernelContext::run_stream().
  std::vector<Tensor>& values_;
  std::atomic<int>* uses_;
  std::atomic<int>* pending_;
  std::atomic<int> remaining_{0};
  std::atomic<bool> aborted_{false};
  Mutex mu_;
  CondVar done_cv_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status Program::Run(RunEnv& env, absl::Span<const Tensor> feeds,
                          std::vector<Tensor>* fetches) {
  const NestingGuard nesting(&run_depth);
  RETURN_IF_ERROR(nesting.Check("running"));
  if (env.intra_op == nullptr) {
    return absl::InvalidArgumentError("RunEnv has no intra-op thread pool");
  }
  if (feeds.size() != spec_.feeds.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program expects ", spec_.feeds.size(), " feeds, got ", feeds.size()));
  }
  RETURN_IF_ERROR(AllocateArena());
  // Every run, even one that fails, consumes a stream: a retried step
  // rounds with fresh bits, as the hardware's generator would. A reset
  // seed restarts the count.
  if (env.floating_point != nullptr &&
      env.floating_point->seed_epoch != seed_epoch_) {
    seed_epoch_ = env.floating_point->seed_epoch;
    runs_ = 0;
  }
  Executor exec(this, &env, Mix64(stream_salt_ + (runs_++ + 1) * kGoldenGamma));
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Output& f = spec_.feeds[i];
    if (feeds[i].dtype() != f.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' is ", DTypeName(feeds[i].dtype()),
          " but ", f.node->DebugName(), " is ", DTypeName(f.dtype())));
    }
    if (feeds[i].shape() != spec_.feed_shapes[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value fed to '", f.name(), "' has shape ",
          feeds[i].shape().DebugString(), " but the program was compiled for ",
          spec_.feed_shapes[i].DebugString()));
    }
    exec.values()[feed_values_[i]] = feeds[i];
  }
  absl::Status s;
  if (env.post_to_shard) {
    s = exec.RunShards();
  } else if (env.inter_op != nullptr && has_branches_ && !env.on_shard &&
             !profiling_) {
    s = exec.RunParallel();
  } else {
    s = exec.RunSequential();
  }
  if (!s.ok()) {
    for (Tensor& t : run_values_) t = Tensor();
    return s;
  }
  if (fetches != nullptr) {
    fetches->clear();
    for (int v : fetch_values_) {
      Tensor& t = exec.values()[v];
      // Results must survive the next run, which reuses the arena.
      fetches->push_back(arena_ != nullptr && t.buffer() == arena_ ? t.Copy()
                                                                   : t);
    }
  }
  // Drop what the run still references (fetches, feeds) until the next run.
  for (int v : fetch_values_) run_values_[v] = Tensor();
  for (int v : feed_values_) run_values_[v] = Tensor();
  return absl::OkStatus();
}

}  // namespace ipuflow
