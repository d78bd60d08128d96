#include "ops/array/strided_slice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ops/array/copy_kernels.h"

namespace ipuflow::ops {
namespace {

struct SliceAttrs {
  std::vector<int64_t> begin, end, strides;
  StridedSliceOptions masks;
};

// What a strided slice of a given x reads. One entry per dimension of x;
// a shrunk dimension has size 1. Invariant: element k of dimension i is
// x's index begin[i] + k * stride[i].
struct SliceGeometry {
  std::vector<int64_t> begin, size, stride;
  TensorShape out;  // `size` without shrunk dimensions; -1 if unknown.
};

absl::StatusOr<SliceAttrs> ReadAttrs(const AttrMap& attrs) {
  SliceAttrs a;
  ASSIGN_OR_RETURN(a.begin, GetAttr<std::vector<int64_t>>(attrs, "begin"));
  ASSIGN_OR_RETURN(a.end, GetAttr<std::vector<int64_t>>(attrs, "end"));
  ASSIGN_OR_RETURN(a.strides, GetAttr<std::vector<int64_t>>(attrs, "strides"));
  ASSIGN_OR_RETURN(a.masks.begin_mask, GetAttr<int64_t>(attrs, "begin_mask"));
  ASSIGN_OR_RETURN(a.masks.end_mask, GetAttr<int64_t>(attrs, "end_mask"));
  ASSIGN_OR_RETURN(a.masks.shrink_axis_mask,
                   GetAttr<int64_t>(attrs, "shrink_axis_mask"));
  return a;
}

absl::Status CheckAttrs(const SliceAttrs& a, const TensorShape& x,
                        const std::string& where) {
  const size_t n = a.begin.size();
  if (a.end.size() != n || a.strides.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("begin ", IntListString(a.begin), ", end ",
                     IntListString(a.end), " and strides ",
                     IntListString(a.strides), " must have the same length"));
  }
  if (static_cast<int>(n) > x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("begin ", IntListString(a.begin), " has ", n,
                     " entries but ", where, " has rank ", x.rank()));
  }
  for (const auto& [name, mask] :
       {std::pair<const char*, int64_t>{"begin_mask", a.masks.begin_mask},
        {"end_mask", a.masks.end_mask},
        {"shrink_axis_mask", a.masks.shrink_axis_mask}}) {
    if (mask < 0 || (n < 62 && (mask >> n) != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " ", mask, " has bits outside the ", n,
          " sliced dimension(s) (valid: [0, ", int64_t{1} << n, "))"));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const bool shrink = (a.masks.shrink_axis_mask >> i) & 1;
    if (a.strides[i] == 0 || (shrink && a.strides[i] < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("strides ", IntListString(a.strides), " has stride ",
                       a.strides[i], " in dimension ", i,
                       shrink ? " with shrink_axis_mask set (must be "
                                "positive)"
                              : " (must be non-zero)"));
    }
  }
  return absl::OkStatus();
}

// TensorFlow's canonical [begin, end) of one dimension of size `dim`.
int64_t SliceSize(int64_t dim, int64_t begin, int64_t end, int64_t stride,
                  bool begin_masked, bool end_masked, int64_t* start) {
  const int64_t lo = stride > 0 ? 0 : -1, hi = stride > 0 ? dim : dim - 1;
  auto canonical = [&](int64_t v, bool masked, bool is_end) {
    if (masked) return (stride > 0) == is_end ? hi : lo;
    const int64_t fwd = v < 0 ? v + dim : v;
    return std::clamp(fwd, lo, hi);
  };
  *start = canonical(begin, begin_masked, false);
  const int64_t length = canonical(end, end_masked, true) - *start;
  if (length == 0 || (length < 0) != (stride < 0)) return 0;
  return length / stride + (length % stride != 0);
}

absl::StatusOr<SliceGeometry> Resolve(const SliceAttrs& a, const TensorShape& x,
                                      const std::string& input_name) {
  const std::string where =
      absl::StrCat(input_name, " (shape ", x.DebugString(), ")");
  RETURN_IF_ERROR(CheckAttrs(a, x, where));
  SliceGeometry g;
  for (int i = 0; i < x.rank(); ++i) {
    const int64_t dim = x.dim(i);
    const bool sliced = i < static_cast<int>(a.begin.size());
    const bool shrink = sliced && ((a.masks.shrink_axis_mask >> i) & 1);
    int64_t start = 0, size = dim, stride = 1;
    if (shrink) {
      start = a.begin[i] < 0 && dim >= 0 ? a.begin[i] + dim : a.begin[i];
      if (dim >= 0 && (start < 0 || start >= dim)) {
        return absl::InvalidArgumentError(
            absl::StrCat("index ", a.begin[i],
                         " (shrink_axis_mask) is out of range for "
                         "dimension ",
                         i, " of size ", dim, " of ", where, " (valid: [", -dim,
                         ", ", dim - 1, "])"));
      }
      size = 1;
    } else if (sliced) {
      stride = a.strides[i];
      if (dim >= 0) {
        size = SliceSize(dim, a.begin[i], a.end[i], stride,
                         (a.masks.begin_mask >> i) & 1,
                         (a.masks.end_mask >> i) & 1, &start);
      }
    }
    g.begin.push_back(start);
    g.size.push_back(size);
    g.stride.push_back(stride);
    if (!shrink) g.out.AddDim(size);
  }
  return g;
}

absl::StatusOr<SliceGeometry> ResolveForNode(const Node& node,
                                             const TensorShape& x,
                                             const std::string& input_name) {
  ASSIGN_OR_RETURN(SliceAttrs a, ReadAttrs(node.attrs()));
  return Resolve(a, x, input_name);
}

// Strides (in elements) with which the slice walks x, and its first element.
void Walk(const SliceGeometry& g, const TensorShape& x,
          std::vector<int64_t>* strides, int64_t* offset) {
  const std::vector<int64_t> xs = RowMajorStrides(x);
  *offset = 0;
  strides->clear();
  for (int i = 0; i < x.rank(); ++i) {
    *offset += g.begin[i] * xs[i];
    strides->push_back(g.stride[i] * xs[i]);
  }
}

absl::Status StridedSliceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  absl::StatusOr<SliceGeometry> g =
      ResolveForNode(ctx.node(), x.shape(), "input 'x'");
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, g->out));
  if (y->NumElements() == 0) return absl::OkStatus();
  std::vector<int64_t> strides;
  int64_t offset;
  Walk(*g, x.shape(), &strides, &offset);
  const size_t elem = DTypeSize(x.dtype());
  StridedCopy(
      ctx, g->size, y->raw_data(), RowMajorStrides(TensorShape(g->size)),
      static_cast<const char*>(x.raw_data()) + offset * elem, strides, elem);
  return absl::OkStatus();
}

absl::Status StridedSliceGradKernel(KernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  const TensorShape& x = ctx.input(1).shape();
  absl::StatusOr<SliceGeometry> g =
      ResolveForNode(ctx.node(), x, "input 'like'");
  if (!g.ok()) return ctx.InvalidArgument(g.status().message());
  if (dy.shape() != g->out) {
    return ctx.InvalidArgument(
        "input 'dy' has shape ", dy.shape().DebugString(),
        " but the slice of input 'like' (shape ", x.DebugString(),
        ") has shape ", g->out.DebugString());
  }
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, x));
  FillTensor(ctx, *dx, 0.0);
  if (dy.NumElements() == 0) return absl::OkStatus();
  std::vector<int64_t> strides;
  int64_t offset;
  Walk(*g, x, &strides, &offset);
  const size_t elem = DTypeSize(dy.dtype());
  // Distinct slice elements are distinct x elements (strides are non-zero),
  // so a scatter by copy is exact.
  StridedCopy(ctx, g->size, static_cast<char*>(dx->raw_data()) + offset * elem,
              strides, dy.raw_data(), RowMajorStrides(TensorShape(g->size)),
              elem);
  return absl::OkStatus();
}

AttrMap SliceAttrMap(const std::vector<int64_t>& begin,
                     const std::vector<int64_t>& end,
                     const std::vector<int64_t>& strides,
                     const StridedSliceOptions& o) {
  return {{"begin", begin},         {"end", end},
          {"strides", strides},     {"begin_mask", o.begin_mask},
          {"end_mask", o.end_mask}, {"shrink_axis_mask", o.shrink_axis_mask}};
}

StridedSliceOptions MasksOf(const Node& op) {
  return {op.attr<int64_t>("begin_mask"), op.attr<int64_t>("end_mask"),
          op.attr<int64_t>("shrink_axis_mask")};
}

REGISTER_OP("StridedSlice")
    .Input("x")
    .RequiredAttr("begin", AttrType::kIntList)
    .RequiredAttr("end", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .Attr("begin_mask", int64_t{0})
    .Attr("end_mask", int64_t{0})
    .Attr("shrink_axis_mask", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(SliceAttrs a, ReadAttrs(c.attrs()));
      ASSIGN_OR_RETURN(SliceGeometry g,
                       Resolve(a, c.input_shape(0), c.InputName(0)));
      c.set_output(0, c.input_dtype(0), g.out);
      return absl::OkStatus();
    })
    .SetKernel(StridedSliceKernel)
    // y = x[begin:end:strides];  dx = dy at the positions read, 0 elsewhere
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      dx->push_back(StridedSliceGrad(
          s, dy[0], op.input(0), op.attr<std::vector<int64_t>>("begin"),
          op.attr<std::vector<int64_t>>("end"),
          op.attr<std::vector<int64_t>>("strides"), MasksOf(op)));
      return absl::OkStatus();
    });

REGISTER_OP("StridedSliceGrad")
    .Input("dy")
    .Input("like")
    .RequiredAttr("begin", AttrType::kIntList)
    .RequiredAttr("end", AttrType::kIntList)
    .RequiredAttr("strides", AttrType::kIntList)
    .Attr("begin_mask", int64_t{0})
    .Attr("end_mask", int64_t{0})
    .Attr("shrink_axis_mask", int64_t{0})
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(SliceAttrs a, ReadAttrs(c.attrs()));
      ASSIGN_OR_RETURN(SliceGeometry g,
                       Resolve(a, c.input_shape(1), c.InputName(1)));
      if (!c.input_shape(0).IsCompatibleWith(g.out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.InputName(0), " has shape ", c.input_shape(0).DebugString(),
            " but the slice of ", c.InputName(1), " (shape ",
            c.input_shape(1).DebugString(), ") has shape ",
            g.out.DebugString()));
      }
      c.set_output(0, c.input_dtype(0), c.input_shape(1));
      return absl::OkStatus();
    })
    .SetKernel(StridedSliceGradKernel)
    // dx = scatter(dy) into zeros;  d(dx)/d(dy) = the same strided slice
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dz,
                    std::vector<Output>* dx) {
      dx->push_back(
          StridedSlice(s, dz[0], op.attr<std::vector<int64_t>>("begin"),
                       op.attr<std::vector<int64_t>>("end"),
                       op.attr<std::vector<int64_t>>("strides"), MasksOf(op)));
      dx->push_back(Output());
      return absl::OkStatus();
    });

}  // namespace

Output StridedSlice(const Scope& scope, Output x,
                    const std::vector<int64_t>& begin,
                    const std::vector<int64_t>& end,
                    const std::vector<int64_t>& strides,
                    StridedSliceOptions options) {
  return scope.AddNode("StridedSlice", {x},
                       SliceAttrMap(begin, end, strides, options));
}

Output StridedSliceGrad(const Scope& scope, Output dy, Output like,
                        const std::vector<int64_t>& begin,
                        const std::vector<int64_t>& end,
                        const std::vector<int64_t>& strides,
                        StridedSliceOptions options) {
  return scope.AddNode("StridedSliceGrad", {dy, like},
                       SliceAttrMap(begin, end, strides, options));
}

}  // namespace ipuflow::ops
