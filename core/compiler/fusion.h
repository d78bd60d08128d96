// Compiler phase, fusion (after shapes, before dependencies): runs chains of
// ops as one node where the op registry has a fused kernel for them (FusionDef,
// REGISTER_FUSION in core/op_registry.h; the kernels live with their ops, e.g.
// ops/nn/fused_*). A step spends part of its time between kernels: writing an
// intermediate (a convolution's output before its bias) to memory and reading
// it back, and the executor's per-node work. Fusing a producer into its
// consumer removes both, as XLA's and TensorFlow's grappler remapper fusions do
// (Conv2D + BiasAdd + Relu -> _FusedConv2D).
//
// A chain fuses when each intermediate is output 0 of its producer, its
// producer's only output, read by exactly one input of the next node and
// not fetched; every node is on the same IPU, stateless, without aliasing
// outputs, sub-programs, always-live memory or a divisor input (the div0
// trap indexes the op's own inputs), not a target, without
// control edges in or out, and the FusionDef's `applies` accepts it. The
// longest chain ending at a node wins; nodes are visited last to first.
//
// The fused node keeps the chain's last node (name, outputs, replica
// identity); its inputs become the chain's inputs (FusionDef order). The
// absorbed nodes leave the node order. An intermediate of the fused output's
// dtype and shape is written into that output (no value of its own: not
// planned); another one becomes a value of the fused node that nothing
// reads, planned in the arena for that node's step only, so the fused
// kernel needs no allocation per run (KernelContext::RunChainKernel).
// `spec.fuse == false`, or IPUFLOW_FUSION=0 in the environment, keeps the
// unfused graph: the reference in tests.
//
// Input: the spec, the value types, the node order and its values (after
// shapes: each node's shape function ran on its own inputs).
// Output: the node order and values rewritten; the chain and FusionDef by
// new position.
#ifndef IPUFLOW_CORE_COMPILER_FUSION_H_
#define IPUFLOW_CORE_COMPILER_FUSION_H_

#include <vector>

#include "core/compiler/node_order.h"
#include "core/compiler/shapes.h"
#include "core/compiler/values.h"
#include "core/op_registry.h"
#include "core/program_spec.h"

namespace ipuflow::compiler {

struct Fusion {
  // By position in the rewritten node order: the chain (producer first, the
  // node at that position last) and its definition; empty / null when the
  // node is not fused.
  std::vector<std::vector<const Node*>> chains;
  std::vector<const FusionDef*> defs;
  // By position: the value id of each chain node's output 0.
  std::vector<std::vector<int>> chain_values;
  int absorbed = 0;  // Nodes that left the order.
};

// Whether fusion is on for `spec` (spec.fuse and not IPUFLOW_FUSION=0).
bool FusionEnabled(const ProgramSpec& spec);

Fusion FuseChains(const ProgramSpec& spec, const ValueTypes& types,
                  NodeOrder* order, Values* values);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_FUSION_H_
