#include "ops/array/identity.h"

#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/shape_fns.h"

namespace ipuflow::ops {

OpRegistration RegisterForwardingOp(const std::string& name) {
  return OpRegistry::Global()
      ->Register(name)
      .Input("x")
      .Forwards(0, 0)
      .SetShapeFn(shape_fns::Unchanged)
      .SetKernel([](KernelContext& ctx) {
        ctx.set_output(0, ctx.input(0));
        return absl::OkStatus();
      })
      // y = x;  dy/dx = 1
      .SetGradient([](const Scope& s, const Node& op,
                      absl::Span<const Output> dy, std::vector<Output>* dx) {
        dx->push_back(dy[0]);
        return absl::OkStatus();
      });
}

namespace {

[[maybe_unused]] const OpRegistration kIdentity =
    RegisterForwardingOp("Identity");

}  // namespace

Output Identity(const Scope& scope, Output x) {
  return scope.AddNode("Identity", {x});
}

}  // namespace ipuflow::ops
