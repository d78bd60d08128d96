// Helpers shared by the ops that take a variable handle (the kResource output
// of a Variable node) as input 0: ReadVariable, the Assign ops and the fused
// optimizer updates.
//
// A shape function cannot see the node behind an input, only its dtype and
// shape, and a handle is a scalar kResource. So the builders copy the
// variable's name, dtype and shape from the Variable node into the op's
// attributes (`variable`, `dtype`, `shape`), and the shape function checks
// the other inputs against those. Kernels re-check against the variable
// itself at run time.
//
//   ASSIGN_OR_RETURN(VariableInfo info, GetVariableInfo(handle));
//   scope.AddNode("AssignAdd", {handle, delta}, HandleAttrs(info));
//
// Thread safety: pure functions.
#ifndef IPUFLOW_OPS_STATE_HANDLE_H_
#define IPUFLOW_OPS_STATE_HANDLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/scope.h"

namespace ipuflow::ops {

// What the graph knows about a variable at build time.
struct VariableInfo {
  Node* node = nullptr;  // The Variable node; not owned.
  std::string name;      // Its name in the ResourceMgr (shared_name or node).
  DType dtype = DType::kInvalid;
  TensorShape shape;
};

// The variable `handle` refers to. InvalidArgument naming the handle unless
// it is the output of a Variable node.
absl::StatusOr<VariableInfo> GetVariableInfo(const Output& handle);

// {"variable": name, "dtype": dtype, "shape": shape}.
AttrMap HandleAttrs(const VariableInfo& info);

// Adds a node of `op` with inputs {handle, rest...} and attributes
// HandleAttrs(handle's variable) plus `attrs`. Every kResource input in
// `rest` (an optimizer's slot) must be a handle to a variable of the same
// dtype and shape. Records an error naming `op` and the variables in the
// scope otherwise, and returns nullptr.
Node* AddHandleNode(const Scope& scope, const std::string& op, Output handle,
                    std::vector<Output> rest, AttrMap attrs = {});

// Shape-function checks: input `i` is a kResource handle; input `i` has the
// variable's dtype and a compatible shape (the error names the variable and
// both dtypes and shapes).
absl::Status ExpectHandle(const ShapeContext& c, int i);
absl::Status ExpectMatchesVariable(const ShapeContext& c, int i);
// Input `i` is a float32 scalar (a learning rate, a decay, a step).
absl::Status ExpectFloatScalar(const ShapeContext& c, int i);

// The variable behind kernel input `i`, checked against the node's `dtype`
// and `shape` attributes. Kept alive by the input tensor for the kernel's
// duration.
absl::StatusOr<VariableResource*> VariableInput(const KernelContext& ctx,
                                                int i);
// Run-time check that kernel input `i` matches `var`'s dtype and shape.
absl::Status CheckMatchesVariable(const KernelContext& ctx, int i,
                                  const VariableResource& var);
// A copy of `var`'s value (FailedPrecondition naming the node and the
// variable if it was never assigned).
absl::StatusOr<Tensor> ReadCopy(const KernelContext& ctx,
                                const VariableResource& var);
// Status `s` with the node's name in front ("ReadVariable 'w/read': ...").
absl::Status WithNodeName(const KernelContext& ctx, const absl::Status& s);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_STATE_HANDLE_H_
