#include "ops/array/triangle.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/copy_kernels.h"

namespace ipuflow::ops {
namespace {

// Row i of a [rows, cols] matrix keeps columns [lo, hi): for Tril
// [0, i + diagonal + 1), for Triu [i + diagonal, cols), clamped.
std::pair<int64_t, int64_t> KeptColumns(bool lower, int64_t i, int64_t diagonal,
                                        int64_t cols) {
  // diagonal is an int64 attribute: clamp before adding so nothing wraps.
  const int64_t d = std::clamp<int64_t>(diagonal, -cols - 1, cols + 1);
  const int64_t edge = std::clamp<int64_t>(i + d + (lower ? 1 : 0), 0, cols);
  return lower ? std::make_pair(int64_t{0}, edge) : std::make_pair(edge, cols);
}

absl::Status TriangleKernel(KernelContext& ctx, bool lower) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) {
    return ctx.InvalidArgument("input 'x' has shape ", x.shape().DebugString(),
                               "; expected rank >= 2 (matrices)");
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.shape()));
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  if (x.NumElements() == 0) return absl::OkStatus();
  const int64_t diagonal = ctx.attr<int64_t>("diagonal");
  const size_t elem = DTypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y->raw_data());
  ctx.ParallelFor(
      x.NumElements() / cols, kCopyCost * cols, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const auto [lo, hi] = KeptColumns(lower, r % rows, diagonal, cols);
          char* out = dst + r * cols * elem;
          std::memset(out, 0, cols * elem);
          if (hi > lo) {
            std::memcpy(out + lo * elem, src + (r * cols + lo) * elem,
                        (hi - lo) * elem);
          }
        }
      });
  return absl::OkStatus();
}

OpRegistration RegisterTriangleOp(const char* name, bool lower) {
  return OpRegistry::Global()
      ->Register(name)
      .Input("x")
      .Attr("diagonal", int64_t{0})
      .SetShapeFn([](ShapeContext& c) -> absl::Status {
        RETURN_IF_ERROR(ExpectDataInput(c, 0));
        RETURN_IF_ERROR(c.attr<int64_t>("diagonal").status());
        if (c.input_shape(0).rank() < 2) {
          return absl::InvalidArgumentError(absl::StrCat(
              c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
              "; expected rank >= 2 (matrices)"));
        }
        c.set_output(0, c.input_dtype(0), c.input_shape(0));
        return absl::OkStatus();
      })
      .SetKernel(
          [lower](KernelContext& ctx) { return TriangleKernel(ctx, lower); })
      // y = mask * x, a fixed mask;  dx = mask * dy, the same op on dy.
      .SetGradient([name](const Scope& s, const Node& op,
                          absl::Span<const Output> dy,
                          std::vector<Output>* dx) {
        dx->push_back(s.AddNode(name, {dy[0]},
                                {{"diagonal", op.attr<int64_t>("diagonal")}}));
        return absl::OkStatus();
      });
}

[[maybe_unused]] const OpRegistration kTril = RegisterTriangleOp("Tril", true);
[[maybe_unused]] const OpRegistration kTriu = RegisterTriangleOp("Triu", false);

}  // namespace

Output Tril(const Scope& scope, Output x, int64_t diagonal) {
  return scope.AddNode("Tril", {x}, {{"diagonal", diagonal}});
}

Output Triu(const Scope& scope, Output x, int64_t diagonal) {
  return scope.AddNode("Triu", {x}, {{"diagonal", diagonal}});
}

}  // namespace ipuflow::ops
