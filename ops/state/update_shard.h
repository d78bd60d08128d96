// UpdateShard: which part of a variable one replica's optimizer update
// computes when the update is sharded over the replicas (replicated
// optimizer-state sharding, ZeRO-1; TensorFlow IPU guide 6.9, "Replicated
// tensor sharding"; the original's elementwise clustering of the resource
// update, wave2_reference.md 1.3). A sharded update is a reduce-scatter of
// the gradient, this replica's update of its chunk of the weight and of the
// optimizer state, and an all-gather of the weight (ops/collective/
// sharded_update.h); the state never leaves its chunk.
//
// The layout is the original's: the variable is read flat (n elements),
// padded to a multiple of R, and replica r owns chunk r,
// [r c, min(n, (r+1) c)) with c = ceil(n/R); the last chunks may be short
// or empty. {index 0, count 1} is the whole variable (an unsharded update).
//
// The shard travels as an int32 [2] tensor {index, count} computed when the
// program runs (the offloaded-state load knows whether the state of an
// update was planned sharded), as the optional last input "shard" of
// ApplyGradientDescent, ApplyMomentum and ApplyAdam:
//
//   Output shard = ...;  // int32 [2]: {replica, replicas} or {0, 1}
//   ops::ApplyAdam(scope, w, m, v, lr, grad, b1, b2, eps, t, 0.f, shard);
//   // elements outside this replica's chunk of w, m and v are untouched.
//
// Kernels record the elements each IPU's updates computed in that IPU's
// counters (TransferCounters::updated_elements, one per IPU of each
// system), so tests can check the 1/R. Host runs (no IPU) count nowhere.
//
// Thread safety: pure functions, except the counters (atomic).
#ifndef IPUFLOW_OPS_STATE_UPDATE_SHARD_H_
#define IPUFLOW_OPS_STATE_UPDATE_SHARD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {

struct UpdateShard {
  int index = 0;
  int count = 1;  // 1: the whole variable.

  bool sharded() const { return count > 1; }
  // Elements per chunk of an n-element variable: ceil(n / count).
  int64_t ChunkSize(int64_t n) const { return (n + count - 1) / count; }
  // [begin, end) of this chunk within the n elements (empty past n).
  int64_t Begin(int64_t n) const;
  int64_t End(int64_t n) const;
};

// The shard of an update op whose optional last input `i` ("shard") may be
// absent (the whole variable). InvalidArgument naming the node unless it is
// {index, count} with 0 <= index < count.
absl::StatusOr<UpdateShard> ShardInput(const KernelContext& ctx, int i);

// Shape-function check: input `i`, if present, is an int32 [2].
absl::Status ExpectShardInput(const ShapeContext& c, int i);

// Runs fn(b, e) over [begin, end) of this shard of an n-element variable in
// parallel chunks (the kernels' ParallelFor, offset), and counts the
// elements on the kernel's IPU.
template <typename Fn>
void ParallelForShard(const KernelContext& ctx, const UpdateShard& shard,
                      int64_t n, double cost, const Fn& fn);

// Adds `elements` to the counters of the kernel's IPU (if any).
void CountUpdatedElements(const KernelContext& ctx, int64_t elements);

template <typename Fn>
void ParallelForShard(const KernelContext& ctx, const UpdateShard& shard,
                      int64_t n, double cost, const Fn& fn) {
  const int64_t begin = shard.Begin(n), end = shard.End(n);
  CountUpdatedElements(ctx, end - begin);
  ctx.ParallelFor(end - begin, cost,
                  [&](int64_t b, int64_t e) { fn(begin + b, begin + e); });
}

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_UPDATE_SHARD_H_
