#include "ops/array/print.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "ops/array/copy_kernels.h"

namespace ipuflow::ops {
namespace {

REGISTER_OP("Print")
    .Input("x")
    .Attr("message", std::string())
    .Attr("summarize", int64_t{3})
    .SetStateful()
    .Forwards(0, 0)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      RETURN_IF_ERROR(c.attr<std::string>("message").status());
      ASSIGN_OR_RETURN(int64_t summarize, c.attr<int64_t>("summarize"));
      if (summarize < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("summarize is ", summarize, "; it must be >= 0"));
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(0));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) {
      const Tensor& x = ctx.input(0);
      const std::string line =
          absl::StrCat(ctx.attr<std::string>("message"),
                       x.DebugString(static_cast<int>(std::min<int64_t>(
                           ctx.attr<int64_t>("summarize"), x.NumElements()))),
                       "\n");
      std::fwrite(line.data(), 1, line.size(), stderr);
      ctx.set_output(0, x);
      return absl::OkStatus();
    })
    // y = x (and a side effect);  dy/dx = 1
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(dy[0]);
      return absl::OkStatus();
    });

}  // namespace

Output Print(const Scope& scope, Output x, const std::string& message,
             int64_t summarize) {
  return scope.AddNode("Print", {x},
                       {{"message", message}, {"summarize", summarize}});
}

}  // namespace ipuflow::ops
