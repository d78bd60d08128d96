// Collectives within one replica: across the IPUs (shards) of a sharded
// model, as Graphcore's `ipu.ops.within_replica_ops` (TensorFlow IPU,
// within_replica_ops.py). input_shards[i] lives on shard i; the result for
// shard i is a node placed on IPU i (Scope::WithIpu), which reads the other
// shards' inputs (the inter-IPU exchange) and computes the whole reduction
// in a fixed order, so every shard gets the same bits.
//   AllReduce(shards, op):      every shard gets op over the shards of the
//     inputs flattened (rank 0 or 1) and zero-padded to the longest, [L].
//     The padding takes part: op(0, z1, z2, z3) as Graphcore's example.
//   ReduceScatter(shards, op):  shard i gets chunk i, [c = ceil(L / n)], of
//     that reduction zero-padded to n * c. (Graphcore's docstring example
//     places the chunks in another, undocumented order: IPU0 the padding,
//     IPU3 the first chunk; ipuflow gives shard i chunk i.)
//   AllGather(shards, axis):    every shard gets the inputs flattened and
//     concatenated, reshaped to their concatenation along `axis` (as
//     Graphcore: for axis > 0 the element order is the flat concatenation's,
//     not tf.concat's).
// op: "sum", "mul", "min", "max" (float32, float16 computed in float32 and
// rounded once, int32, int64; min / max propagate NaN), "logical_and",
// "logical_or" (bool), "local" (any dtype: shard i keeps its own input, or
// its own chunk i; nothing exchanged) = Graphcore's COLLECTIVE_OP_ADD, _MUL,
// _MIN, _MAX, _LOGICAL_AND, _LOGICAL_OR, _LOCAL. Gradients: sum, local and
// AllGather (each shard's output gradient flows back to the shards it
// read); the others are an error naming the op.
//
//   // x0 built under scope.WithIpu(0), x1 under scope.WithIpu(1):
//   std::vector<Output> y = ops::WithinReplicaAllReduce(scope, {x0, x1},
//                                                       "sum");  // y[i]: IPU i
#ifndef IPUFLOW_OPS_COLLECTIVE_WITHIN_REPLICA_H_
#define IPUFLOW_OPS_COLLECTIVE_WITHIN_REPLICA_H_

#include <string>
#include <vector>

#include "core/scope.h"

namespace ipuflow::ops {

// One output per input shard, output i placed on IPU i. The inputs must
// have fully known shapes, one dtype, no input twice.
std::vector<Output> WithinReplicaAllReduce(
    const Scope& scope, const std::vector<Output>& input_shards,
    const std::string& op);
std::vector<Output> WithinReplicaReduceScatter(
    const Scope& scope, const std::vector<Output>& input_shards,
    const std::string& op);
std::vector<Output> WithinReplicaAllGather(
    const Scope& scope, const std::vector<Output>& input_shards,
    int64_t axis = 0);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_COLLECTIVE_WITHIN_REPLICA_H_
