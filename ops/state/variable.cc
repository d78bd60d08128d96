#include "ops/state/variable.h"

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/state/assign.h"
#include "ops/state/read_variable.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Variable")
    .RequiredAttr("dtype", AttrType::kDType)
    .RequiredAttr("shape", AttrType::kShape)
    .Attr("shared_name", "")
    .Attr("trainable", true)
    .SetStateful()
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
      ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
      RETURN_IF_ERROR(c.attr<std::string>("shared_name").status());
      RETURN_IF_ERROR(c.attr<bool>("trainable").status());
      if (dtype == DType::kResource || dtype == DType::kInvalid) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a variable cannot hold ", DTypeName(dtype), " values"));
      }
      if (!shape.IsFullyDefined()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shape ", shape.DebugString(),
            " is not fully defined; a variable (and its initial value) needs "
            "every dimension known when the graph is built"));
      }
      c.set_output(0, DType::kResource, TensorShape());
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.env().resources == nullptr) {
        return ctx.Error(absl::StatusCode::kFailedPrecondition,
                         "the device has no ResourceMgr for variables");
      }
      const std::string& shared = ctx.attr<std::string>("shared_name");
      absl::StatusOr<std::shared_ptr<VariableResource>> var =
          ctx.env().resources->LookupOrCreateVariable(
              shared.empty() ? ctx.node().name() : shared,
              ctx.attr<DType>("dtype"), ctx.attr<TensorShape>("shape"));
      if (!var.ok()) return ctx.InvalidArgument(var.status().message());
      ctx.set_output(0, Tensor::ForResource(*std::move(var)));
      return absl::OkStatus();
    })
    .SetAlwaysLive(AlwaysLive::kVariable,
                   [](const Node& n) {
                     return n.attr<TensorShape>("shape").num_elements() *
                            static_cast<int64_t>(
                                DTypeSize(n.attr<DType>("dtype")));
                   })
    .NotDifferentiable(
        "a variable handle is not a value; differentiate "
        "with respect to a ReadVariable's output");

// The variable's node name relative to the scope's prefix, so its companion
// nodes can be named "<name>/Assign" in the same scope.
std::string LocalName(const Scope& scope, const Node& n) {
  if (scope.prefix().empty()) return n.name();
  return n.name().substr(scope.prefix().size() + 1);
}

}  // namespace

Output Variable(const Scope& scope, DType dtype, const TensorShape& shape,
                const VariableOptions& options) {
  return scope.AddNode("Variable", {},
                       {{"dtype", dtype},
                        {"shape", shape},
                        {"shared_name", options.shared_name},
                        {"trainable", options.trainable}});
}

VariableHandle Variable(const Scope& scope, Output initial_value,
                        const VariableOptions& options) {
  VariableHandle v;
  if (!scope.ok()) return v;
  if (!initial_value.valid()) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        "Variable: the initial value is invalid (built from an earlier "
        "failed op)"));
    return v;
  }
  const Scope vs = scope.WithNoControlDependencies();
  v.handle =
      Variable(vs, initial_value.dtype(), initial_value.shape(), options);
  if (!v.handle.valid()) return v;
  Node* var = v.handle.node;
  const std::string name = LocalName(scope, *var);
  v.initializer = Assign(vs.WithOpName(absl::StrCat(name, "/Assign")), v.handle,
                         initial_value);
  v.value =
      ReadVariable(scope.WithOpName(absl::StrCat(name, "/Read")), v.handle);
  if (!scope.ok()) return VariableHandle();
  Graph* g = scope.graph();
  g->AddToCollection("initializers", v.initializer);
  g->AddToCollection("variables", var);
  if (options.trainable) g->AddToCollection("trainable_variables", var);
  return v;
}

bool IsVariable(const Node* node) {
  return node != nullptr && node->op() == "Variable";
}

}  // namespace ipuflow::ops
