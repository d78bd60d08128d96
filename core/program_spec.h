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
};

// A program a node's kernel runs, named by its role ("body", "cond").
struct SubProgramSpec {
  std::string role;
  ProgramSpec spec;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_PROGRAM_SPEC_H_
