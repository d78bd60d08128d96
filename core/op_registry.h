// The op registry. An op is defined in one place, in one chain: its
// signature (inputs, attributes with defaults), its shape function, its CPU
// kernel and its gradient (or the reason it has none).
//
//   REGISTER_OP("Square")
//       .Input("x")
//       .SetShapeFn(shape_fns::UnchangedFloat)
//       .SetKernel(SquareKernel)
//       // y = x^2;  dy/dx = 2x
//       .SetGradient([](const Scope& s, const Node& op,
//                       absl::Span<const Output> dy, std::vector<Output>* dx) {
//         dx->push_back(Mul(s, dy[0], Mul(s, Const(s, 2.f), op.input(0))));
//         return absl::OkStatus();
//       });
//
// Every attribute is declared with its type: `.Attr(name, default)` (the
// default's type), `.RequiredAttr(name, AttrType::kShape)`, or
// `.OptionalAttr(name, type)` (may be absent). Graph::AddNode refuses a
// node whose attributes are missing, of another type, or undeclared (names
// starting with '_' are free-form annotations), so kernels and gradients can
// read declared attributes with Node::attr<T>() without a check.
//
// The number of outputs is whatever the shape function sets. Registration
// happens in static initialisers: op libraries are `alwayslink`.
//
// Thread safety: registration happens before main(); lookups are read-only
// and safe from any thread.
#ifndef IPUFLOW_CORE_OP_REGISTRY_H_
#define IPUFLOW_CORE_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/attr_value.h"
#include "core/graph.h"
#include "core/program_spec.h"
#include "core/status.h"

namespace ipuflow {

class KernelContext;
class Scope;
class ShapeContext;

using ShapeFn = std::function<absl::Status(ShapeContext&)>;
using KernelFn = std::function<absl::Status(KernelContext&)>;
// Builds the gradients of `op`'s inputs from the gradients of its outputs.
// `dy[i]` is invalid (Output{}) when output i received no gradient. Pushes one
// entry per input; an invalid Output means "no gradient for this input".
using GradFn = std::function<absl::Status(const Scope& scope, const Node& op,
                                          absl::Span<const Output> dy,
                                          std::vector<Output>* dx)>;

// How a stateful op touches the resource (variable) given as its input 0.
enum class ResourceAccess { kNone, kRead, kWrite };

// Memory a node holds for the program's whole life, outside the arena: the
// memory planner counts it as always-live, in this category.
enum class AlwaysLive { kNone, kConstant, kVariable };
using AlwaysLiveBytesFn = std::function<int64_t(const Node& node)>;

// The programs a node's kernel runs (a loop's body and condition, a
// pipeline frame's stage parts and weight update), for the node's input
// shapes and the enclosing program's compile options (`enclosing`: its
// fuse and recompute), so that the compiler can plan their memory too.
using SubProgramsFn = std::function<absl::StatusOr<std::vector<SubProgramSpec>>(
    const Node& node, absl::Span<const TensorShape> input_shapes,
    const ProgramSpec& enclosing)>;

// The value a node always outputs, known while building (a constant), so
// that shape functions of its consumers can read it.
using ConstantValueFn = std::function<const Tensor&(const Node& node)>;

// Whether a node's outputs are identical on every replica, for stochastic
// rounding in REPLICA_IDENTICAL_ONLY mode (core/compiler/replica_identical.h).
// kFollowsInputs (the default): identical when all its inputs are (a pure
// function of them; so are ops without inputs, such as constants and
// variables, which start and stay identical). kIdentical: whatever its
// inputs (an all-reduce over all replicas). kDiffers: may differ (an infeed
// dequeue, the replica index, a per-replica random mask).
enum class ReplicaIdentity { kFollowsInputs, kIdentical, kDiffers };
using ReplicaIdentityFn = std::function<ReplicaIdentity(const Node& node)>;

// One declared attribute of an op.
struct AttrDef {
  std::string name;
  AttrType type;
  bool required = false;    // Must be given (no default).
  AttrValue default_value;  // Empty for required and optional attributes.
};

class OpDef {
 public:
  const std::string& name() const { return name_; }
  const std::vector<std::string>& input_names() const { return inputs_; }
  // True if the last declared input takes any number (>= 0) of tensors.
  bool variadic_input() const { return variadic_; }
  // Declared attributes by name.
  const std::map<std::string, AttrDef>& attrs() const { return attrs_; }
  const AttrDef* FindAttr(const std::string& name) const {
    auto it = attrs_.find(name);
    return it == attrs_.end() ? nullptr : &it->second;
  }
  // Fills defaults into `attrs` and checks them against the declarations:
  // InvalidArgument naming the attribute, its value and the declared type.
  absl::Status CheckAttrs(AttrMap* attrs) const;
  const ShapeFn& shape_fn() const { return shape_fn_; }
  const KernelFn& kernel() const { return kernel_; }
  const GradFn& gradient() const { return gradient_; }
  bool has_gradient() const { return static_cast<bool>(gradient_); }
  // Why the op has no gradient ("integer output", ...); empty if it has one.
  const std::string& not_differentiable_reason() const { return no_grad_; }
  bool is_stateful() const { return stateful_; }
  ResourceAccess resource_access() const { return resource_access_; }
  // Output -> input whose buffer the output may alias (no copy).
  const std::map<int, int>& forwards() const { return forwards_; }
  AlwaysLive always_live() const { return always_live_; }
  // Bytes a node of this op holds; set iff always_live() != kNone.
  const AlwaysLiveBytesFn& always_live_bytes() const {
    return always_live_bytes_;
  }
  // Set for ops whose kernel runs sub-programs (device loops).
  const SubProgramsFn& sub_programs() const { return sub_programs_; }
  // Set for ops whose output is known while building (Const).
  const ConstantValueFn& constant_value() const { return constant_value_; }
  // True for ops that stand for a value the program must feed
  // (placeholders, loop arguments): compiling one unfed is an error.
  bool needs_feed() const { return needs_feed_; }
  // What the op says of `node`'s replica identity (see ReplicaIdentity).
  ReplicaIdentity replica_identity(const Node& node) const {
    return replica_identity_fn_ ? replica_identity_fn_(node)
                                : replica_identity_;
  }
  // The input holding the divisor of an op that divides (for the div0
  // floating-point trap: an infinity from finite inputs where the divisor
  // holds a zero); -1 for other ops.
  int divisor_input() const { return divisor_input_; }

 private:
  friend class OpRegistration;
  friend class OpRegistry;
  std::string name_;
  std::vector<std::string> inputs_;
  bool variadic_ = false;
  std::map<std::string, AttrDef> attrs_;
  ShapeFn shape_fn_;
  KernelFn kernel_;
  GradFn gradient_;
  std::string no_grad_;
  bool stateful_ = false;
  ResourceAccess resource_access_ = ResourceAccess::kNone;
  std::map<int, int> forwards_;
  AlwaysLive always_live_ = AlwaysLive::kNone;
  AlwaysLiveBytesFn always_live_bytes_;
  SubProgramsFn sub_programs_;
  ConstantValueFn constant_value_;
  bool needs_feed_ = false;
  ReplicaIdentity replica_identity_ = ReplicaIdentity::kFollowsInputs;
  ReplicaIdentityFn replica_identity_fn_;
  int divisor_input_ = -1;
};

// Fluent builder returned by REGISTER_OP.
class OpRegistration {
 public:
  explicit OpRegistration(OpDef* def) : def_(def) {}
  OpRegistration& Input(std::string name);
  // Any number (>= 0) of inputs; must be the last input.
  OpRegistration& VariadicInput(std::string name);
  // An attribute with a default; its type is the default's.
  OpRegistration& Attr(std::string name, AttrValue default_value);
  OpRegistration& RequiredAttr(std::string name, AttrType type);
  // An attribute that may be absent (no default).
  OpRegistration& OptionalAttr(std::string name, AttrType type);
  OpRegistration& SetShapeFn(ShapeFn fn);
  OpRegistration& SetKernel(KernelFn fn);
  OpRegistration& SetGradient(GradFn fn);
  OpRegistration& NotDifferentiable(std::string reason);
  OpRegistration& SetStateful(ResourceAccess access = ResourceAccess::kNone);
  OpRegistration& Forwards(int output, int input);
  OpRegistration& SetAlwaysLive(AlwaysLive kind, AlwaysLiveBytesFn bytes);
  OpRegistration& SetSubPrograms(SubProgramsFn fn);
  OpRegistration& SetConstantValue(ConstantValueFn fn);
  OpRegistration& SetNeedsFeed();
  OpRegistration& SetReplicaIdentity(ReplicaIdentity identity);
  // For ops whose identity depends on the node (its replica groups).
  OpRegistration& SetReplicaIdentity(ReplicaIdentityFn fn);
  // The op divides by input `input` (see OpDef::divisor_input).
  OpRegistration& SetDivisorInput(int input);

 private:
  OpDef* def_;
};

// A chain of ops that one kernel runs as one node (core/compiler/fusion.h):
// ops[0] -> ops[1] -> ... -> ops[k], where input chain_inputs[i - 1] of
// ops[i] is output 0 of ops[i - 1], an intermediate nothing else reads. The
// fused node keeps the last op's node (its name, attributes, outputs) and
// takes as inputs ops[0]'s inputs, then each later op's other inputs in
// order; its kernel sees every node of the chain (KernelContext::
// fused_nodes()). Declared by the ops layer, so the compiler knows no op
// names:
//
//   REGISTER_FUSION("BiasAdd+Relu")
//       .Chain({"BiasAdd", "Relu"}, {0})
//       .SetApplies([](absl::Span<const Node* const> chain) { ... })
//       .SetKernel(BiasAddReluKernel);
struct FusionDef {
  std::string name;
  std::vector<std::string> ops;   // Producer first.
  std::vector<int> chain_inputs;  // ops.size() - 1 entries.
  // Whether these nodes (matched by op) fuse: dtypes, attributes. Unset:
  // always.
  std::function<bool(absl::Span<const Node* const> chain)> applies;
  KernelFn kernel;
};

class FusionRegistration {
 public:
  explicit FusionRegistration(FusionDef* def) : def_(def) {}
  FusionRegistration& Chain(std::vector<std::string> ops,
                            std::vector<int> chain_inputs);
  FusionRegistration& SetApplies(
      std::function<bool(absl::Span<const Node* const>)> fn);
  FusionRegistration& SetKernel(KernelFn fn);

 private:
  FusionDef* def_;
};

class OpRegistry {
 public:
  static OpRegistry* Global();
  // Aborts on a duplicate name (a build error, not a user error).
  OpRegistration Register(const std::string& name);
  // NotFound naming the op if it is unknown.
  absl::StatusOr<const OpDef*> Find(const std::string& name) const;
  std::vector<const OpDef*> ops() const;
  // Aborts on a duplicate name.
  FusionRegistration RegisterFusion(const std::string& name);
  // Longest chains first (the compiler tries them in this order).
  std::vector<const FusionDef*> fusions() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>> ops_;
  std::map<std::string, std::unique_ptr<FusionDef>> fusions_;
};

// What a shape function sees: the node's inputs, attributes and (for inputs
// from ops with a constant_value, e.g. Const) their values.
class ShapeContext {
 public:
  ShapeContext(const OpDef* def, std::string name,
               const std::vector<DType>* in_dtypes,
               const std::vector<TensorShape>* in_shapes,
               const std::vector<const Tensor*>* in_constants,
               const AttrMap* attrs, const Graph* graph)
      : def_(def),
        name_(std::move(name)),
        in_dtypes_(in_dtypes),
        in_shapes_(in_shapes),
        in_constants_(in_constants),
        attrs_(attrs),
        graph_(graph) {}

  const std::string& node_name() const { return name_; }
  const std::string& op_name() const { return def_->name(); }
  int num_inputs() const { return static_cast<int>(in_dtypes_->size()); }
  DType input_dtype(int i) const { return (*in_dtypes_)[i]; }
  const TensorShape& input_shape(int i) const { return (*in_shapes_)[i]; }
  // The value of input i if its op has a constant_value, else nullptr.
  const Tensor* input_constant(int i) const { return (*in_constants_)[i]; }
  const AttrMap& attrs() const { return *attrs_; }
  template <typename T>
  absl::StatusOr<T> attr(const std::string& name) const {
    return GetAttr<T>(*attrs_, name);
  }
  // The graph the node is being added to (for function attributes).
  const Graph* graph() const { return graph_; }

  void set_output(int i, DType dtype, TensorShape shape);
  const std::vector<DType>& output_dtypes() const { return out_dtypes_; }
  const std::vector<TensorShape>& output_shapes() const { return out_shapes_; }

  // Common checks; errors name the input by its declared name.
  absl::Status ExpectRank(int input, int rank) const;
  absl::Status ExpectFloat(int input) const;
  absl::Status ExpectDType(int input, DType dtype) const;
  absl::Status ExpectSameDType(int a, int b) const;
  std::string InputName(int i) const;

 private:
  const OpDef* def_;
  std::string name_;
  const std::vector<DType>* in_dtypes_;
  const std::vector<TensorShape>* in_shapes_;
  const std::vector<const Tensor*>* in_constants_;
  const AttrMap* attrs_;
  const Graph* graph_;
  std::vector<DType> out_dtypes_;
  std::vector<TensorShape> out_shapes_;
};

#define REGISTER_OP(name)                                       \
  static ::ipuflow::OpRegistration IPUFLOW_CONCAT_(             \
      ipuflow_op_registration_, __COUNTER__) [[maybe_unused]] = \
      ::ipuflow::OpRegistry::Global()->Register(name)

#define REGISTER_FUSION(name)                                       \
  static ::ipuflow::FusionRegistration IPUFLOW_CONCAT_(             \
      ipuflow_fusion_registration_, __COUNTER__) [[maybe_unused]] = \
      ::ipuflow::OpRegistry::Global()->RegisterFusion(name)

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_OP_REGISTRY_H_
