// ProgramSpec: what a compiled Program feeds, fetches and runs. Its own
// header so the op registry can describe the programs a node's kernel runs
// (a loop's body) without depending on the compiler.
#ifndef IPUFLOW_CORE_PROGRAM_SPEC_H_
#define IPUFLOW_CORE_PROGRAM_SPEC_H_

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/tensor_shape.h"

namespace ipuflow {

struct ProgramSpec {
  std::vector<Output> feeds;
  std::vector<TensorShape> feed_shapes;  // Fully defined, one per feed.
  std::vector<Output> fetches;
  std::vector<Node*> targets;  // Run for their effect; nothing returned.
  // Run chains of ops as one fused kernel where the op registry has one
  // (core/compiler/fusion.h); off gives the unfused graph, the reference.
  // IPUFLOW_FUSION=0 in the environment turns it off for every program.
  bool fuse = true;
  // IPUConfig.allow_recompute (DeviceProgram::Compile sets it; sub-programs
  // inherit it): a pipeline frame's backward programs recompute the forward
  // values from the stage's arguments rather than stash them.
  bool recompute = false;
};

// A program a node's kernel runs, named by its role ("body", "cond",
// "stage 1 forward").
struct SubProgramSpec {
  std::string role;
  ProgramSpec spec;
  // The node's kernel runs shard k of this program on IPU k of the
  // replica (a pipeline frame's parts), not on the node's own IPU: its
  // memory counts there, and the enclosing program spans those IPUs.
  bool own_ipus = false;
  // Buffers the node's kernel holds for this program between its runs, on
  // shard `held_shard`: a pipeline stage's activation stash and incoming
  // channels (FIFOs) at capacity. Counted in the enclosing plan.
  int held_shard = 0;
  int64_t held_stash_bytes = 0;
  int64_t held_fifo_bytes = 0;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_PROGRAM_SPEC_H_
