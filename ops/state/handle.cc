#include "ops/state/handle.h"

#include "absl/strings/str_cat.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

std::string VariableName(const ShapeContext& c) {
  absl::StatusOr<std::string> name = c.attr<std::string>("variable");
  return name.ok() && !name->empty() ? absl::StrCat("variable '", *name, "'")
                                     : std::string("the variable");
}

// `handle` is a variable handle, and so is every kResource in `slots`, with
// the same dtype and shape.
absl::Status CheckHandles(const Output& handle,
                          const std::vector<Output>& slots) {
  ASSIGN_OR_RETURN(VariableInfo var, GetVariableInfo(handle));
  for (const Output& slot : slots) {
    if (!slot.valid() || slot.dtype() != DType::kResource) continue;
    ASSIGN_OR_RETURN(VariableInfo info, GetVariableInfo(slot));
    if (info.dtype != var.dtype || info.shape != var.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slot variable '", info.name, "' is ", DTypeName(info.dtype),
          info.shape.DebugString(), " but variable '", var.name, "' is ",
          DTypeName(var.dtype), var.shape.DebugString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VariableInfo> GetVariableInfo(const Output& handle) {
  if (!handle.valid()) {
    return absl::InvalidArgumentError(
        "the variable handle is invalid (built from an earlier failed op)");
  }
  Node* n = handle.node;
  if (!IsVariable(n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", handle.name(), "' is not a variable handle: it comes from ",
        n->DebugName(), ", not from a Variable node"));
  }
  VariableInfo info;
  info.node = n;
  const std::string& shared = n->attr<std::string>("shared_name");
  info.name = shared.empty() ? n->name() : shared;
  info.dtype = n->attr<DType>("dtype");
  info.shape = n->attr<TensorShape>("shape");
  return info;
}

AttrMap HandleAttrs(const VariableInfo& info) {
  return {
      {"variable", info.name}, {"dtype", info.dtype}, {"shape", info.shape}};
}

Node* AddHandleNode(const Scope& scope, const std::string& op, Output handle,
                    std::vector<Output> rest, AttrMap attrs) {
  if (!scope.ok()) return nullptr;
  absl::Status status = CheckHandles(handle, rest);
  if (!status.ok()) {
    scope.UpdateStatus(
        absl::Status(status.code(), absl::StrCat(op, ": ", status.message())));
    return nullptr;
  }
  attrs.merge(HandleAttrs(*GetVariableInfo(handle)));
  rest.insert(rest.begin(), handle);
  return scope.AddNode(op, std::move(rest), std::move(attrs));
}

absl::Status ExpectHandle(const ShapeContext& c, int i) {
  RETURN_IF_ERROR(c.ExpectDType(i, DType::kResource));
  ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
  ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
  if (!shape.IsFullyDefined() || dtype == DType::kResource ||
      dtype == DType::kInvalid) {
    return absl::InvalidArgumentError(
        absl::StrCat("attributes describe ", VariableName(c), " as ",
                     DTypeName(dtype), shape.DebugString(),
                     "; a variable has a value dtype and a full shape"));
  }
  return absl::OkStatus();
}

absl::Status ExpectMatchesVariable(const ShapeContext& c, int i) {
  ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
  ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
  if (c.input_dtype(i) != dtype || !c.input_shape(i).IsCompatibleWith(shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.InputName(i), " is ", DTypeName(c.input_dtype(i)),
                     c.input_shape(i).DebugString(), " but ", VariableName(c),
                     " is ", DTypeName(dtype), shape.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ExpectFloatScalar(const ShapeContext& c, int i) {
  RETURN_IF_ERROR(c.ExpectDType(i, DType::kFloat32));
  if (c.input_shape(i).rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.InputName(i), " must be a float32 scalar, got shape ",
                     c.input_shape(i).DebugString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<VariableResource*> VariableInput(const KernelContext& ctx,
                                                int i) {
  const Tensor& t = ctx.input(i);
  auto* var = dynamic_cast<VariableResource*>(t.resource().get());
  if (t.dtype() != DType::kResource || var == nullptr) {
    return ctx.InvalidArgument("input ", i, " is not a variable handle (",
                               t.DebugString(), ")");
  }
  const DType dtype = ctx.attr<DType>("dtype");
  const TensorShape& shape = ctx.attr<TensorShape>("shape");
  if (var->dtype() != dtype || var->shape() != shape) {
    return ctx.InvalidArgument("the node was built for a ", DTypeName(dtype),
                               shape.DebugString(), " variable but variable '",
                               var->name(), "' is ", DTypeName(var->dtype()),
                               var->shape().DebugString());
  }
  return var;
}

absl::Status CheckMatchesVariable(const KernelContext& ctx, int i,
                                  const VariableResource& var) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != var.dtype() || t.shape() != var.shape()) {
    return ctx.InvalidArgument(
        "input '", ctx.node().op_def().input_names()[i], "' is ",
        DTypeName(t.dtype()), t.shape().DebugString(), " but variable '",
        var.name(), "' is ", DTypeName(var.dtype()), var.shape().DebugString());
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ReadCopy(const KernelContext& ctx,
                                const VariableResource& var) {
  absl::StatusOr<Tensor> t = var.Read();
  if (!t.ok()) return WithNodeName(ctx, t.status());
  return t;
}

absl::Status WithNodeName(const KernelContext& ctx, const absl::Status& s) {
  if (s.ok()) return s;
  return ctx.Error(s.code(), s.message());
}

}  // namespace ipuflow::ops
