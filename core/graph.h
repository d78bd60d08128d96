// Graph, Node and Output: the dataflow graph a program is built from.
//
// A Graph owns its Nodes. Nodes are appended in creation order and an input
// must exist before the node that consumes it, so node ids are a topological
// order (autodiff and the compiler rely on this). Every node's output dtypes
// and shapes are inferred when it is added, by its op's shape function; a
// node that fails shape inference is never added.
//
// A Graph also holds a library of Functions: sub-graphs with arguments and
// results, used as loop bodies and pipeline stages, and a table of the host
// resources (infeed and outfeed queues) its kernels use, by id.
//
//   Graph g;
//   ASSIGN_OR_RETURN(Node* n, g.AddNode({"MatMul", "dense/matmul", {x, w}}));
//   Output y(n, 0);   // y.shape() == [?, 10]
//
// Thread safety: building is single-threaded; a Graph that is no longer
// modified may be read from any number of threads.
#ifndef IPUFLOW_CORE_GRAPH_H_
#define IPUFLOW_CORE_GRAPH_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/attr_value.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tensor_shape.h"

namespace ipuflow {

class Graph;
class Node;
class OpDef;

// A host object that a graph's kernels reach by id: an infeed or outfeed
// queue (feeds/). Its builder owns it and registers it with the graph when
// it adds the node that uses it (Graph::AddHostResource).
class HostResource : public Resource {
 public:
  // Called on a host thread when an executable that uses the resource is
  // compiled for `num_replicas` replicas (`training`: the program updates
  // variables): host threads start there, not lazily on a device thread.
  // An error is reported again by the kernel.
  virtual absl::Status Prepare(int num_replicas, bool training) = 0;
  // Called on a host thread when a run of such an executable ended well;
  // an error fails the run.
  virtual absl::Status RunFinished() { return absl::OkStatus(); }
  // Called on a host thread when a run of such an executable ended with
  // `status` (not OK: a kernel error, a cancel, the system reset), so the
  // resource can wake its host-side readers with the reason.
  virtual void RunStopped(const absl::Status& status) {}
};

// One output of a node: the edge handle users build graphs with.
struct Output {
  Output() = default;
  Output(Node* n, int i = 0) : node(n), index(i) {}  // NOLINT: implicit.

  bool valid() const { return node != nullptr; }
  DType dtype() const;
  const TensorShape& shape() const;
  std::string name() const;  // "node_name:index"
  bool operator==(const Output& o) const {
    return node == o.node && index == o.index;
  }
  bool operator!=(const Output& o) const { return !(*this == o); }
  bool operator<(const Output& o) const;
  template <typename H>
  friend H AbslHashValue(H h, const Output& o) {
    return H::combine(std::move(h), o.node, o.index);
  }

  Node* node = nullptr;
  int index = 0;
};

// The most shards (IPUs per replica) a graph may use: a node's ipu is -1
// (unplaced) or in [0, kMaxShards), like IPUConfig's kMaxIpus.
inline constexpr int kMaxShards = 1024;

// What a caller passes to Graph::AddNode.
struct NodeSpec {
  std::string op;
  std::string name;
  std::vector<Output> inputs;
  AttrMap attrs;
  std::vector<Node*> control_inputs;
  int ipu = -1;       // Shard (IPU index within a replica); -1: unplaced.
  std::string block;  // PopTorch-style block name; empty: none.
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::string& op() const { return op_; }
  const OpDef& op_def() const { return *op_def_; }
  Graph* graph() const { return graph_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Output& input(int i) const { return inputs_[i]; }
  const std::vector<Output>& inputs() const { return inputs_; }
  const std::vector<Node*>& control_inputs() const { return control_inputs_; }

  int num_outputs() const { return static_cast<int>(output_dtypes_.size()); }
  DType output_dtype(int i) const { return output_dtypes_[i]; }
  const TensorShape& output_shape(int i) const { return output_shapes_[i]; }

  const AttrMap& attrs() const { return attrs_; }
  // The attribute `name` of type T. Graph::AddNode guarantees every
  // declared attribute (except OptionalAttr ones) is present with its
  // declared type; reading an undeclared or mistyped one is a programming
  // error in the op and aborts with the node and attribute named.
  template <typename T>
  const T& attr(const std::string& name) const {
    auto it = attrs_.find(name);
    const T* v = it == attrs_.end() ? nullptr : it->second.get<T>();
    if (v == nullptr) AttrTypeError(name, AttrTypeName<T>());
    return *v;
  }
  bool has_attr(const std::string& name) const { return attrs_.count(name); }

  int ipu() const { return ipu_; }
  const std::string& block() const { return block_; }

  // "MatMul 'dense/matmul'": how errors name this node.
  std::string DebugName() const;

 private:
  friend class Graph;
  [[noreturn]] void AttrTypeError(const std::string& name,
                                  const char* type) const;
  int id_ = -1;
  std::string name_;
  std::string op_;
  const OpDef* op_def_ = nullptr;
  Graph* graph_ = nullptr;
  std::vector<Output> inputs_;
  std::vector<Node*> control_inputs_;
  AttrMap attrs_;
  std::vector<DType> output_dtypes_;
  std::vector<TensorShape> output_shapes_;
  int ipu_ = -1;
  std::string block_;
};

// A sub-graph with named arguments and results (a loop body, a stage).
// Its `body` holds one "_Arg" node per argument, in order.
struct Function {
  std::string name;
  std::unique_ptr<Graph> body;
  std::vector<Output> args;
  std::vector<Output> results;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Validates `spec` against its op (input count and dtypes, attributes),
  // infers output shapes, and appends the node. Errors name the node and op.
  absl::StatusOr<Node*> AddNode(NodeSpec spec);

  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  Node* node(int id) const { return nodes_[id].get(); }
  Node* FindNode(const std::string& name) const;
  // Nodes in id (= topological) order.
  std::vector<Node*> nodes() const;
  // A name not yet used in this graph, derived from `base`.
  std::string UniqueName(const std::string& base);

  // Function library.
  absl::Status AddFunction(std::unique_ptr<Function> fn);
  const Function* FindFunction(const std::string& name) const;
  const std::map<std::string, std::unique_ptr<Function>>& functions() const {
    return functions_;
  }

  // Nodes collected under a name (e.g. "variables", "initializers").
  void AddToCollection(const std::string& key, Node* node);
  const std::vector<Node*>& collection(const std::string& key) const;
  const std::map<std::string, std::vector<Node*>>& collections() const {
    return collections_;
  }

  // Host resources. The graph holds weak references: the owner decides the
  // lifetime, and a kernel whose resource is gone finds null instead of a
  // dangling pointer (no process-global registry). Registering an id again
  // adds a user.
  struct HostResourceEntry {
    std::weak_ptr<HostResource> resource;
    std::vector<int> users;  // Ids of the nodes that use it.
  };
  void AddHostResource(const std::string& id,
                       std::weak_ptr<HostResource> resource, const Node* user) {
    HostResourceEntry& e = host_resources_[id];
    e.resource = std::move(resource);
    e.users.push_back(user->id());
  }
  // The resource called `id` while it lives; null if never added or gone.
  std::shared_ptr<HostResource> FindHostResource(const std::string& id) const {
    auto it = host_resources_.find(id);
    return it == host_resources_.end() ? nullptr : it->second.resource.lock();
  }
  const std::map<std::string, HostResourceEntry>& host_resources() const {
    return host_resources_;
  }

  // A digest of the nodes, attributes, placement and functions: equal graphs
  // give equal fingerprints within a process (compile caches key on it).
  // Memoised: nodes never change once added.
  std::string Fingerprint() const;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_map<std::string, Node*> by_name_;
  absl::flat_hash_set<std::string> used_names_;  // Nodes and scope prefixes.
  absl::flat_hash_map<std::string, int> name_counters_;  // Last suffix used.
  std::map<std::string, std::unique_ptr<Function>> functions_;
  std::map<std::string, std::vector<Node*>> collections_;
  std::map<std::string, HostResourceEntry> host_resources_;
  mutable std::string fingerprint_;
  mutable int fingerprint_nodes_ = -1;
  mutable int fingerprint_functions_ = -1;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_GRAPH_H_
