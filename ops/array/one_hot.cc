#include "ops/array/one_hot.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "ops/array/copy_kernels.h"

namespace ipuflow::ops {
namespace {

// The output shape: `indices` with `depth` inserted at `axis`.
absl::StatusOr<TensorShape> OneHotShape(const TensorShape& indices,
                                        int64_t depth, int64_t axis,
                                        const std::string& input_name) {
  if (depth < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth is ", depth, "; expected >= 0"));
  }
  const int rank = indices.rank() + 1;
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "axis ", axis, " is out of range for ", input_name, " of shape ",
        indices.DebugString(), " (valid: [", -rank, ", ", rank - 1, "])"));
  }
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end());
  dims.insert(dims.begin() + a, depth);
  TensorShape out(dims);
  absl::Status valid = ValidateShape(out);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth ", depth, " for ", input_name, " of shape ",
                     indices.DebugString(), ": ", valid.message()));
  }
  return out;
}

template <typename Index, typename T>
void FillOneHot(const KernelContext& ctx, const Index* idx, T* y, int64_t outer,
                int64_t depth, int64_t inner, T on, T off) {
  ctx.ParallelFor(outer, static_cast<double>(depth * inner),
                  [&](int64_t b, int64_t e) {
                    for (int64_t o = b; o < e; ++o) {
                      T* slab = y + o * depth * inner;
                      std::fill(slab, slab + depth * inner, off);
                      for (int64_t i = 0; i < inner; ++i) {
                        const Index k = idx[o * inner + i];
                        if (k >= 0 && k < depth) slab[k * inner + i] = on;
                      }
                    }
                  });
}

template <typename Index>
absl::Status OneHotKernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const int64_t depth = ctx.attr<int64_t>("depth");
  absl::StatusOr<TensorShape> shape = OneHotShape(
      indices.shape(), depth, ctx.attr<int64_t>("axis"), "input 'indices'");
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
  if (y->NumElements() == 0) return absl::OkStatus();
  const int64_t axis = ctx.attr<int64_t>("axis");
  const int a = static_cast<int>(axis < 0 ? axis + shape->rank() : axis);
  const int64_t outer = shape->DimProduct(0, a);
  const int64_t inner = shape->DimProduct(a + 1, shape->rank());
  const float on = ctx.attr<float>("on_value");
  const float off = ctx.attr<float>("off_value");
  const Index* idx = indices.data<Index>();
  IPUFLOW_SWITCH_NUMERIC(
      y->dtype(),
      (FillOneHot<Index, T>(ctx, idx, y->data<T>(), outer, depth, inner,
                            static_cast<T>(on), static_cast<T>(off))),
      return ctx.InvalidArgument("no kernel for dtype ",
                                 DTypeName(y->dtype())));
  return absl::OkStatus();
}

REGISTER_OP("OneHot")
    .Input("indices")
    .RequiredAttr("depth", AttrType::kInt)
    .Attr("axis", int64_t{-1})
    .Attr("on_value", 1.0f)
    .Attr("off_value", 0.0f)
    .Attr("dtype", DType::kFloat32)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      const DType it = c.input_dtype(0);
      if (it != DType::kInt32 && it != DType::kInt64) {
        return absl::InvalidArgumentError(
            absl::StrCat(c.InputName(0), " is ", DTypeName(it),
                         "; expected int32 or int64"));
      }
      ASSIGN_OR_RETURN(int64_t depth, c.attr<int64_t>("depth"));
      ASSIGN_OR_RETURN(int64_t axis, c.attr<int64_t>("axis"));
      ASSIGN_OR_RETURN(const float on, c.attr<float>("on_value"));
      ASSIGN_OR_RETURN(const float off, c.attr<float>("off_value"));
      ASSIGN_OR_RETURN(DType dt, c.attr<DType>("dtype"));
      if (dt != DType::kFloat32 && dt != DType::kFloat16 &&
          dt != DType::kInt32 && dt != DType::kInt64) {
        return absl::InvalidArgumentError(
            absl::StrCat("dtype is ", DTypeName(dt),
                         "; expected float32, float16, int32 or int64"));
      }
      // An integer output holds on / off exactly, or the cast would be
      // undefined behaviour (1e30 to int32).
      if (dt == DType::kInt32 || dt == DType::kInt64) {
        const double limit =
            dt == DType::kInt32 ? 2147483648.0 : 9223372036854775808.0;
        for (const auto& [name, v] :
             {std::pair<const char*, float>{"on_value", on},
              {"off_value", off}}) {
          if (!(std::isfinite(v) && v == std::trunc(v) && v >= -limit &&
                v < limit)) {
            return absl::InvalidArgumentError(
                absl::StrCat(name, " ", v, " is not an integer that ",
                             DTypeName(dt), " holds"));
          }
        }
      }
      ASSIGN_OR_RETURN(TensorShape out, OneHotShape(c.input_shape(0), depth,
                                                    axis, c.InputName(0)));
      c.set_output(0, dt, out);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      if (ctx.input(0).dtype() == DType::kInt32) {
        return OneHotKernel<int32_t>(ctx);
      }
      return OneHotKernel<int64_t>(ctx);
    })
    .NotDifferentiable("the input is integer indices");

}  // namespace

Output OneHot(const Scope& scope, Output indices, int64_t depth, int64_t axis,
              float on_value, float off_value, DType dtype) {
  return scope.AddNode("OneHot", {indices},
                       {{"depth", depth},
                        {"axis", axis},
                        {"on_value", on_value},
                        {"off_value", off_value},
                        {"dtype", dtype}});
}

}  // namespace ipuflow::ops
