#include "ops/math/serialized_mat_mul.h"

#include <numeric>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/transpose.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

using RowMat =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMat>;
using Mat = Eigen::Map<RowMat>;

enum class Split { kM, kK, kN };

absl::StatusOr<Split> ParseSplit(const std::string& s) {
  if (s == "a_columns") return Split::kM;
  if (s == "a_rows_b_columns") return Split::kK;
  if (s == "b_rows") return Split::kN;
  return absl::InvalidArgumentError(absl::StrCat(
      "serialization_dimension must be \"a_columns\", \"a_rows_b_columns\" "
      "or \"b_rows\", got \"",
      s, "\""));
}

struct Geometry {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  TensorShape out;
};

absl::StatusOr<Geometry> GeometryOf(const TensorShape& a, const TensorShape& b,
                                    bool ta, bool tb, const AttrMap& attrs) {
  const int r = a.rank();
  if (r < 2 || b.rank() != r) {
    return absl::InvalidArgumentError(absl::StrCat("a ", a.DebugString(),
                                                   " and b ", b.DebugString(),
                                                   " must have one rank >= 2"));
  }
  Geometry g;
  g.m = a.dim(ta ? r - 1 : r - 2);
  g.k = a.dim(ta ? r - 2 : r - 1);
  const int64_t kb = b.dim(tb ? r - 1 : r - 2);
  g.n = b.dim(tb ? r - 2 : r - 1);
  auto differ = [](int64_t x, int64_t y) {
    return x != kUnknownDim && y != kUnknownDim && x != y;
  };
  bool bad = differ(g.k, kb);
  for (int i = 0; i < r - 2; ++i) bad = bad || differ(a.dim(i), b.dim(i));
  if (bad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", a.DebugString(), ta ? "^T" : "", " and b ", b.DebugString(),
        tb ? "^T" : "",
        " must be [..., m, k] and [..., k, n] with equal batch dimensions"));
  }
  ASSIGN_OR_RETURN(int64_t factor,
                   GetAttr<int64_t>(attrs, "serialization_factor"));
  ASSIGN_OR_RETURN(std::string dim,
                   GetAttr<std::string>(attrs, "serialization_dimension"));
  ASSIGN_OR_RETURN(Split split, ParseSplit(dim));
  const int64_t split_size =
      split == Split::kM ? g.m : (split == Split::kK ? g.k : g.n);
  if (factor < 1 || (split_size != kUnknownDim && split_size % factor != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serialization_factor ", factor, " must be >= 1 and divide the ", dim,
        " dimension ", split_size));
  }
  g.batch = a.DimProduct(0, r - 2);
  g.out = a;
  g.out.set_dim(r - 2, g.m);
  g.out.set_dim(r - 1, g.n);
  return g;
}

// One batch element: c = op(a) op(b), `factor` pieces along `split`.
template <typename A, typename B>
void Pieces(const A& a, const B& b, Split split, int64_t factor, Mat& c) {
  const int64_t m = c.rows(), n = c.cols(), k = a.cols();
  switch (split) {
    case Split::kM: {
      const int64_t p = m / factor;
      for (int64_t i = 0; i < factor; ++i) {
        c.middleRows(i * p, p).noalias() = a.middleRows(i * p, p) * b;
      }
      return;
    }
    case Split::kK: {
      const int64_t p = k / factor;
      c.setZero();
      for (int64_t i = 0; i < factor; ++i) {
        c.noalias() += a.middleCols(i * p, p) * b.middleRows(i * p, p);
      }
      return;
    }
    case Split::kN: {
      const int64_t p = n / factor;
      for (int64_t i = 0; i < factor; ++i) {
        c.middleCols(i * p, p).noalias() = a * b.middleCols(i * p, p);
      }
      return;
    }
  }
}

absl::Status SerializedMatMulKernel(KernelContext& ctx) {
  const bool ta = ctx.attr<bool>("transpose_a");
  const bool tb = ctx.attr<bool>("transpose_b");
  const Tensor& at = ctx.input(0);
  const Tensor& bt = ctx.input(1);
  absl::StatusOr<Geometry> geo =
      GeometryOf(at.shape(), bt.shape(), ta, tb, ctx.node().attrs());
  if (!geo.ok()) return ctx.InvalidArgument(geo.status().message());
  const Geometry g = *geo;
  const Split split =
      *ParseSplit(ctx.attr<std::string>("serialization_dimension"));
  const int64_t factor = ctx.attr<int64_t>("serialization_factor");
  const Tensor a32 = AsFloat32(ctx, at), b32 = AsFloat32(ctx, bt);
  Float32Output out;
  RETURN_IF_ERROR(out.Allocate(ctx, 0, g.out));
  const float* pa = a32.data<float>();
  const float* pb = b32.data<float>();
  float* pc = out.data();
  const int r = at.rank();
  const int64_t a_rows = at.dim(r - 2), a_cols = at.dim(r - 1);
  const int64_t b_rows = bt.dim(r - 2), b_cols = bt.dim(r - 1);
  ctx.ParallelFor(g.batch, 2.0 * g.m * g.k * g.n, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      ConstMat am(pa + i * a_rows * a_cols, a_rows, a_cols);
      ConstMat bm(pb + i * b_rows * b_cols, b_rows, b_cols);
      Mat cm(pc + i * g.m * g.n, g.m, g.n);
      if (g.m * g.n == 0) continue;
      if (ta && tb) {
        Pieces(am.transpose(), bm.transpose(), split, factor, cm);
      } else if (ta) {
        Pieces(am.transpose(), bm, split, factor, cm);
      } else if (tb) {
        Pieces(am, bm.transpose(), split, factor, cm);
      } else {
        Pieces(am, bm, split, factor, cm);
      }
    }
  });
  out.Finish(ctx);
  return absl::OkStatus();
}

std::vector<int64_t> SwapLast2(int rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

REGISTER_OP("SerializedMatMul")
    .Input("a")
    .Input("b")
    .Attr("serialization_factor", int64_t{1})
    .Attr("serialization_dimension", "a_columns")
    .Attr("transpose_a", false)
    .Attr("transpose_b", false)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(c.ExpectFloat(0));
      RETURN_IF_ERROR(c.ExpectSameDType(0, 1));
      ASSIGN_OR_RETURN(bool ta, c.attr<bool>("transpose_a"));
      ASSIGN_OR_RETURN(bool tb, c.attr<bool>("transpose_b"));
      ASSIGN_OR_RETURN(
          Geometry g,
          GeometryOf(c.input_shape(0), c.input_shape(1), ta, tb, c.attrs()));
      c.set_output(0, c.input_dtype(0), g.out);
      return absl::OkStatus();
    })
    .SetKernel(SerializedMatMulKernel)
    // C = A B (A = op(a), B = op(b)) split along m, k or n:
    //   dA = dC B^T: [m, n] x [n, k]; the forward's m is its m, k its n,
    //                n its reduction: split m -> m, k -> n, n -> k.
    //   dB = A^T dC: [k, m] x [m, n]; m is its reduction, k its rows,
    //                n its columns: split m -> k, k -> m, n -> n.
    // Each is transposed back when a (b) was given transposed.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const bool ta = op.attr<bool>("transpose_a");
      const bool tb = op.attr<bool>("transpose_b");
      const int64_t factor = op.attr<int64_t>("serialization_factor");
      ASSIGN_OR_RETURN(
          Split split,
          ParseSplit(op.attr<std::string>("serialization_dimension")));
      const char* da_dim[] = {"a_columns", "b_rows", "a_rows_b_columns"};
      const char* db_dim[] = {"a_rows_b_columns", "a_columns", "b_rows"};
      const int idx = static_cast<int>(split);
      Output da = SerializedMatMul(
          s, dy[0], op.input(1),
          {.factor = factor, .dimension = da_dim[idx], .transpose_b = !tb});
      Output db = SerializedMatMul(
          s, op.input(0), dy[0],
          {.factor = factor, .dimension = db_dim[idx], .transpose_a = !ta});
      const int rank = op.input(0).shape().rank();
      if (ta) da = Transpose(s, da, SwapLast2(rank));
      if (tb) db = Transpose(s, db, SwapLast2(rank));
      *dx = {da, db};
      return absl::OkStatus();
    });

}  // namespace

Output SerializedMatMul(const Scope& scope, Output a, Output b,
                        const SerializedMatMulOptions& options) {
  return scope.AddNode("SerializedMatMul", {a, b},
                       {{"serialization_factor", options.factor},
                        {"serialization_dimension", options.dimension},
                        {"transpose_a", options.transpose_a},
                        {"transpose_b", options.transpose_b}});
}

}  // namespace ipuflow::ops
