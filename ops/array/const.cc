#include "ops/array/const.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::ops {
namespace {

// The Const kernel's value, per program.
struct ConstState : KernelState {
  explicit ConstState(const Tensor* v) : value(v) {}
  const Tensor* value;  // Not owned: the node's attribute.
};

REGISTER_OP("Const")
    .RequiredAttr("value", AttrType::kTensor)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(Tensor value, c.attr<Tensor>("value"));
      if (value.dtype() == DType::kResource || !value.valid()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "attribute 'value' is a ", DTypeName(value.dtype()),
            " tensor; a constant holds float32, float16, int32, int64 or "
            "bool values"));
      }
      c.set_output(0, value.dtype(), value.shape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      // The attribute is found by name once per program (a map lookup and
      // string compares per run showed in a device loop's profile); the node
      // and its attributes outlive the program that holds this state.
      std::unique_ptr<KernelState>& state = ctx.state();
      if (state == nullptr) {
        state = std::make_unique<ConstState>(&ctx.attr<Tensor>("value"));
      }
      ctx.set_output(0, *static_cast<const ConstState*>(state.get())->value);
      return absl::OkStatus();
    })
    .SetAlwaysLive(AlwaysLive::kConstant,
                   [](const Node& n) {
                     return static_cast<int64_t>(
                         n.attr<Tensor>("value").TotalBytes());
                   })
    .SetConstantValue([](const Node& n) -> const Tensor& {
      return n.attr<Tensor>("value");
    })
    .NotDifferentiable("a constant has no inputs");

REGISTER_OP("Placeholder")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
      ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
      if (!HoldsValues(dtype)) {
        // A fed resource would be a handle from outside the graph's
        // variables (issue 22).
        return absl::InvalidArgumentError(absl::StrCat(
            "attribute 'dtype' is ", DTypeName(dtype),
            "; a placeholder is fed float32, float16, int32, int64 or bool "
            "values"));
      }
      c.set_output(0, dtype, shape);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      // Never runs: the compiler rejects an unfed Placeholder.
      return ctx.Error(absl::StatusCode::kInvalidArgument, "was not fed");
    })
    .SetNeedsFeed()
    .NotDifferentiable("a placeholder has no inputs");

}  // namespace

Output Const(const Scope& scope, const Tensor& value) {
  return scope.AddNode("Const", {}, {{"value", value}});
}

Output Const(const Scope& scope, float value) {
  return Const(scope, Tensor::Scalar<float>(value));
}

Output Const(const Scope& scope, double value, DType dtype) {
  if (!HoldsValues(dtype)) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "Const: dtype ", DTypeName(dtype), " cannot hold the value ", value,
        "; a constant holds float32, float16, int32, int64 or bool values")));
    return Output();
  }
  return Const(scope, Tensor::Filled(dtype, TensorShape(), value));
}

Output Placeholder(const Scope& scope, DType dtype, const TensorShape& shape) {
  return scope.AddNode("Placeholder", {}, {{"dtype", dtype}, {"shape", shape}});
}

}  // namespace ipuflow::ops
