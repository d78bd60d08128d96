#include "ops/array/transpose.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "ops/array/copy_kernels.h"

namespace ipuflow::ops {
namespace {

// y.shape for x.shape permuted by `perm`, or an error naming both.
absl::StatusOr<TensorShape> PermutedShape(const TensorShape& x,
                                          absl::Span<const int64_t> perm,
                                          const std::string& input_name) {
  const int rank = x.rank();
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "perm ", IntListString(perm), " is not a permutation of [0, ", rank,
        ") for ", input_name, " of rank ", rank, " (shape ", x.DebugString(),
        ")"));
  }
  TensorShape out;
  for (int64_t p : perm) out.AddDim(x.dim(static_cast<int>(p)));
  return out;
}

// The same transpose with size-1 dimensions dropped and input dimensions
// that stay adjacent (and in order) merged.
void Coalesce(const TensorShape& x, absl::Span<const int64_t> perm,
              std::vector<int64_t>* dims, std::vector<int64_t>* new_perm) {
  // Map each kept input dim to its index among kept dims.
  std::vector<int> kept(x.rank(), -1);
  std::vector<int64_t> in_dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (x.dim(d) != 1) {
      kept[d] = static_cast<int>(in_dims.size());
      in_dims.push_back(x.dim(d));
    }
  }
  std::vector<int64_t> p;
  for (int64_t d : perm) {
    if (kept[d] >= 0) p.push_back(kept[d]);
  }
  // Group runs p[k], p[k]+1, ... into one dimension.
  std::vector<int> group_of(in_dims.size(), -1);
  std::vector<int64_t> heads;  // First input dim of each group, output order.
  for (size_t k = 0; k < p.size(); ++k) {
    if (k > 0 && p[k] == p[k - 1] + 1) {
      group_of[p[k]] = group_of[p[k - 1]];
    } else {
      group_of[p[k]] = static_cast<int>(heads.size());
      heads.push_back(p[k]);
    }
  }
  // Groups in input order give the merged input dims.
  std::vector<int64_t> group_size(heads.size(), 1);
  for (size_t d = 0; d < in_dims.size(); ++d)
    group_size[group_of[d]] *= in_dims[d];
  std::vector<int> order(heads.size());
  for (size_t g = 0; g < heads.size(); ++g) order[g] = static_cast<int>(g);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return heads[a] < heads[b]; });
  std::vector<int64_t> rank_of_group(heads.size());
  dims->clear();
  for (size_t r = 0; r < order.size(); ++r) {
    rank_of_group[order[r]] = static_cast<int64_t>(r);
    dims->push_back(group_size[order[r]]);
  }
  new_perm->clear();
  for (size_t g = 0; g < heads.size(); ++g)
    new_perm->push_back(rank_of_group[g]);
}

// y[b] = x[b]^T for x:[B,R,C] and y:[B,C,R], in cache-sized tiles;
// blocks of output rows run in parallel.
template <typename U>
void BatchTranspose2D(const KernelContext& ctx, int64_t B, int64_t R, int64_t C,
                      const U* x, U* y) {
  using Mat = Eigen::Matrix<U, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  constexpr int64_t kTile = 32;
  const int64_t blocks = (C + kTile - 1) / kTile;
  ctx.ParallelFor(
      B * blocks, kCopyCost * 2 * kTile * R, [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t b = u / blocks, c0 = (u % blocks) * kTile;
          const int64_t tc = std::min(kTile, C - c0);
          Eigen::Map<const Mat> in(x + b * R * C, R, C);
          Eigen::Map<Mat> out(y + b * R * C, C, R);
          for (int64_t r0 = 0; r0 < R; r0 += kTile) {
            const int64_t tr = std::min(kTile, R - r0);
            out.block(c0, r0, tc, tr) = in.block(r0, c0, tr, tc).transpose();
          }
        }
      });
}

absl::Status TransposeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& perm = ctx.attr<std::vector<int64_t>>("perm");
  absl::StatusOr<TensorShape> shape =
      PermutedShape(x.shape(), perm, "input 'x'");
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, *shape));
  if (x.NumElements() == 0) return absl::OkStatus();
  std::vector<int64_t> dims, p;
  Coalesce(x.shape(), perm, &dims, &p);
  const size_t elem = DTypeSize(x.dtype());
  const int rank = static_cast<int>(dims.size());
  if (rank <= 1) {  // Nothing moves.
    std::memcpy(y->raw_data(), x.raw_data(), x.TotalBytes());
    return absl::OkStatus();
  }
  const bool swap_last_two = p[rank - 1] == rank - 2 && p[rank - 2] == rank - 1;
  if (swap_last_two && rank <= 3) {  // [R,C] or [B,R,C] with perm [0,2,1].
    const int64_t B = rank == 3 ? dims[0] : 1;
    WithElementType(elem, [&](auto tag) {
      using U = decltype(tag);
      BatchTranspose2D<U>(ctx, B, dims[rank - 2], dims[rank - 1],
                          static_cast<const U*>(x.raw_data()),
                          static_cast<U*>(y->raw_data()));
    });
    return absl::OkStatus();
  }
  // General case (a memcpy per row when the innermost dimension stays).
  const std::vector<int64_t> in_strides = RowMajorStrides(TensorShape(dims));
  std::vector<int64_t> out_dims, src_strides;
  for (int64_t d : p) {
    out_dims.push_back(dims[d]);
    src_strides.push_back(in_strides[d]);
  }
  StridedCopy(ctx, out_dims, y->raw_data(),
              RowMajorStrides(TensorShape(out_dims)), x.raw_data(), src_strides,
              elem);
  return absl::OkStatus();
}

REGISTER_OP("Transpose")
    .Input("x")
    .RequiredAttr("perm", AttrType::kIntList)
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(ExpectDataInput(c, 0));
      ASSIGN_OR_RETURN(auto perm, c.attr<std::vector<int64_t>>("perm"));
      ASSIGN_OR_RETURN(TensorShape out,
                       PermutedShape(c.input_shape(0), perm, c.InputName(0)));
      c.set_output(0, c.input_dtype(0), out);
      return absl::OkStatus();
    })
    .SetKernel(TransposeKernel)
    // y = transpose(x, perm);  dy/dx = transpose(dy, inverse(perm))
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      const auto& perm = op.attr<std::vector<int64_t>>("perm");
      std::vector<int64_t> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = i;
      dx->push_back(Transpose(s, dy[0], inverse));
      return absl::OkStatus();
    });

}  // namespace

Output Transpose(const Scope& scope, Output x,
                 const std::vector<int64_t>& perm) {
  return scope.AddNode("Transpose", {x}, {{"perm", perm}});
}

}  // namespace ipuflow::ops
