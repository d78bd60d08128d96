// Scope: where the graph-building API puts the next node. A Scope carries
// the graph, a name prefix, the IPU (shard) and block nodes are placed on,
// control dependencies, and the status shared by every scope derived from
// the same root: builders record the first error there and return an
// invalid Output, so a program can build a whole model and check once.
//
//   Scope root = Scope::NewRootScope();
//   Scope layer = root.NewSubScope("dense1").WithIpu(1);
//   Output x = ops::Placeholder(root, DType::kFloat32, {-1, 784});
//   Output y = ops::MatMul(layer, x, w);   // node "dense1/MatMul" on IPU 1
//   if (!root.ok()) return root.status();  // "MatMul 'dense1/MatMul': ..."
//
// Thread safety: a Scope and the Graph it builds are used by one thread.
#ifndef IPUFLOW_CORE_SCOPE_H_
#define IPUFLOW_CORE_SCOPE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/graph.h"

namespace ipuflow {

class Scope {
 public:
  static Scope NewRootScope();

  // Child scopes (cheap copies sharing the graph and status).
  Scope NewSubScope(const std::string& name) const;
  // The next node is called exactly `name` (under the prefix), made unique.
  Scope WithOpName(const std::string& name) const;
  Scope WithIpu(int ipu) const;
  Scope WithBlock(const std::string& block) const;
  Scope WithControlDependencies(const std::vector<Node*>& deps) const;
  Scope WithNoControlDependencies() const;

  Graph* graph() const { return shared_->graph.get(); }
  std::shared_ptr<Graph> graph_ptr() const { return shared_->graph; }
  const absl::Status& status() const { return shared_->status; }
  bool ok() const { return shared_->status.ok(); }
  // Keeps the first error.
  void UpdateStatus(const absl::Status& s) const;

  int ipu() const { return ipu_; }
  const std::string& block() const { return block_; }
  const std::string& prefix() const { return prefix_; }

  // Adds a node of `op` named after the scope (or `default_name`), with the
  // scope's placement and control dependencies. On error records it and
  // returns nullptr; an invalid input (from an earlier error) is nullptr too.
  Node* AddNode(const std::string& op, std::vector<Output> inputs,
                AttrMap attrs = {}, const std::string& default_name = "") const;

 private:
  struct Shared {
    std::shared_ptr<Graph> graph;
    absl::Status status;
  };
  explicit Scope(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  std::shared_ptr<Shared> shared_;
  std::string prefix_;
  std::string op_name_;
  int ipu_ = -1;
  std::string block_;
  std::vector<Node*> control_deps_;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_SCOPE_H_
