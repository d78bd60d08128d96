#include "ops/collective/within_replica.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "core/op_registry.h"
#include "ops/array/pad.h"
#include "ops/array/reshape.h"
#include "ops/array/slice.h"
#include "ops/math/float32_output.h"
#include "ops/math/half_io.h"

namespace ipuflow::ops {
namespace {

enum class Op { kSum, kMul, kMin, kMax, kAnd, kOr, kLocal };

absl::StatusOr<Op> ParseWithinReplicaOp(const std::string& op) {
  static const auto* ops = new std::vector<std::pair<std::string, Op>>{
      {"sum", Op::kSum},    {"mul", Op::kMul},         {"min", Op::kMin},
      {"max", Op::kMax},    {"logical_and", Op::kAnd}, {"logical_or", Op::kOr},
      {"local", Op::kLocal}};
  for (const auto& [name, o] : *ops) {
    if (name == op) return o;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("op must be one of sum, mul, min, max, logical_and, "
                   "logical_or, local; got \"",
                   op, "\""));
}

bool Logical(Op op) { return op == Op::kAnd || op == Op::kOr; }

// The inputs: one dtype, fully known shapes, rank 0 or 1 for reductions
// (`reduce`); `op` allowed for the dtype.
absl::Status CheckShards(const ShapeContext& c, bool reduce, Op op) {
  if (c.num_inputs() < 1) {
    return absl::InvalidArgumentError("needs at least one input shard");
  }
  for (int i = 0; i < c.num_inputs(); ++i) {
    RETURN_IF_ERROR(c.ExpectSameDType(0, i));
    const TensorShape& s = c.input_shape(i);
    if (!s.IsFullyDefined() || (reduce && s.rank() > 1) ||
        s.rank() != c.input_shape(0).rank()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input shard ", i, " has shape ", s.DebugString(), "; the shards ",
          reduce ? "must be fully known scalars or vectors"
                 : "must be fully known and of one rank",
          " (shard 0: ", c.input_shape(0).DebugString(), ")"));
    }
  }
  const DType t = c.input_dtype(0);
  if (!reduce || op == Op::kLocal) return absl::OkStatus();
  const bool numeric = t == DType::kFloat32 || t == DType::kFloat16 ||
                       t == DType::kInt32 || t == DType::kInt64;
  if (Logical(op) ? t != DType::kBool : !numeric) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op ",
        Logical(op) ? "logical_and / logical_or takes bool"
                    : "sum / mul / min / max take float32, float16, "
                      "int32 or int64",
        ", got ", DTypeName(t)));
  }
  return absl::OkStatus();
}

int64_t LongestShard(const std::vector<TensorShape>& shapes) {
  int64_t l = 0;
  for (const TensorShape& s : shapes) l = std::max(l, s.num_elements());
  return l;
}

std::vector<TensorShape> InputShapes(const ShapeContext& c) {
  std::vector<TensorShape> s;
  for (int i = 0; i < c.num_inputs(); ++i) s.push_back(c.input_shape(i));
  return s;
}

std::vector<TensorShape> InputShapes(const KernelContext& ctx) {
  std::vector<TensorShape> s;
  for (int i = 0; i < ctx.num_inputs(); ++i) s.push_back(ctx.input(i).shape());
  return s;
}

int64_t ChunkOf(int64_t longest, int64_t shards) {
  return (longest + shards - 1) / shards;
}

template <typename T>
T Combine(Op op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return op == Op::kAnd ? (a && b) : (a || b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;  // Wraps, as the IPU's integers.
    switch (op) {
      case Op::kSum:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case Op::kMul:
        return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case Op::kMin:
        return std::min(a, b);
      default:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case Op::kSum:
        return a + b;
      case Op::kMul:
        return a * b;
      case Op::kMin:
        return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
      default:
        return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    }
  }
}

// out[k] = element begin + k of the reduction of the zero-padded shards
// (or of shard `own`'s input for local), zero past `longest`.
template <typename T>
void Reduce(Op op, const std::vector<const T*>& in,
            const std::vector<int64_t>& len, int64_t own, int64_t begin,
            int64_t longest, T* out, int64_t count) {
  for (int64_t k = 0; k < count; ++k) {
    const int64_t e = begin + k;
    auto at = [&](size_t j) { return e < len[j] ? in[j][e] : T(0); };
    T acc = T(0);
    if (e < longest) {
      if (op == Op::kLocal) {
        acc = at(own);
      } else {
        acc = at(0);
        for (size_t j = 1; j < in.size(); ++j) acc = Combine(op, acc, at(j));
      }
    }
    out[k] = acc;
  }
}

// The kernel of AllReduce (begin 0, count L) and ReduceScatter (chunk
// `shard`).
absl::Status ReduceKernel(KernelContext& ctx, bool scatter) {
  ASSIGN_OR_RETURN(Op op, ParseWithinReplicaOp(ctx.attr<std::string>("op")));
  const int64_t shard = ctx.attr<int64_t>("shard");
  const int64_t n = ctx.num_inputs();
  const int64_t longest = LongestShard(InputShapes(ctx));
  const int64_t count = scatter ? ChunkOf(longest, n) : longest;
  const int64_t begin = scatter ? shard * count : 0;
  std::vector<int64_t> len;
  for (int64_t j = 0; j < n; ++j) len.push_back(ctx.input(j).NumElements());
  const DType t = ctx.input(0).dtype();
  const TensorShape shape({count});
  if (t == DType::kFloat32 || t == DType::kFloat16) {
    std::vector<Tensor> wide;
    std::vector<const float*> in;
    for (int64_t j = 0; j < n; ++j) {
      wide.push_back(AsFloat32(ctx, ctx.input(j)));
      in.push_back(wide.back().data<float>());
    }
    Float32Output y;
    RETURN_IF_ERROR(y.Allocate(ctx, 0, shape));
    Reduce<float>(op, in, len, shard, begin, longest, y.data(), count);
    y.Finish(ctx);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, shape));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> in;
    for (int64_t j = 0; j < n; ++j) in.push_back(ctx.input(j).data<T>());
    Reduce<T>(op, in, len, shard, begin, longest, y->data<T>(), count);
  };
  switch (t) {
    case DType::kInt32:
      run(int32_t{});
      break;
    case DType::kInt64:
      run(int64_t{});
      break;
    case DType::kBool:
      run(bool{});
      break;
    default:
      return ctx.InvalidArgument("op ", ctx.attr<std::string>("op"),
                                 " does not take ", DTypeName(t));
  }
  return absl::OkStatus();
}

absl::Status ReduceShapeFn(ShapeContext& c, bool scatter) {
  ASSIGN_OR_RETURN(std::string name, c.attr<std::string>("op"));
  ASSIGN_OR_RETURN(Op op, ParseWithinReplicaOp(name));
  RETURN_IF_ERROR(CheckShards(c, /*reduce=*/true, op));
  ASSIGN_OR_RETURN(int64_t shard, c.attr<int64_t>("shard"));
  if (shard < 0 || shard >= c.num_inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard, " is outside [0, ", c.num_inputs(), ")"));
  }
  const int64_t longest = LongestShard(InputShapes(c));
  c.set_output(
      0, c.input_dtype(0),
      TensorShape({scatter ? ChunkOf(longest, c.num_inputs()) : longest}));
  return absl::OkStatus();
}

// The gradient of one shard's output y = elements [begin, begin + count)
// of the padded reduction: each input j read by it (all for sum, shard's
// own for local) gets dy's part that covers its elements.
absl::Status ReduceGradient(const Scope& s, const Node& op, Output dy,
                            bool scatter, std::vector<Output>* dx) {
  const std::string& name = op.attr<std::string>("op");
  if (name != "sum" && name != "local") {
    return absl::UnimplementedError(
        absl::StrCat(op.DebugName(), ": the gradient of op \"", name,
                     "\" is not implemented (sum and local have one)"));
  }
  const int64_t n = op.num_inputs(), shard = op.attr<int64_t>("shard");
  std::vector<TensorShape> shapes;
  for (int64_t j = 0; j < n; ++j) shapes.push_back(op.input(j).shape());
  const int64_t longest = LongestShard(shapes);
  const int64_t count = scatter ? ChunkOf(longest, n) : longest;
  const int64_t begin = scatter ? shard * count : 0;
  dx->assign(n, Output());
  for (int64_t j = 0; j < n; ++j) {
    if (name == "local" && j != shard) continue;
    const int64_t len = shapes[j].num_elements();
    const int64_t m = std::clamp<int64_t>(len - begin, 0, count);
    if (m == 0) continue;  // This output covers none of input j.
    Output g = Slice(s, dy, {0}, {m});
    if (begin > 0 || begin + m < len) {
      g = Pad(s, g, {begin, len - begin - m});
    }
    (*dx)[j] = Reshape(s, g, shapes[j]);
  }
  return s.status();
}

REGISTER_OP("WithinReplicaAllReduce")
    .VariadicInput("shards")
    .Attr("op", "sum")
    .Attr("shard", int64_t{0})
    .SetShapeFn([](ShapeContext& c) { return ReduceShapeFn(c, false); })
    .SetKernel([](KernelContext& ctx) { return ReduceKernel(ctx, false); })
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return ReduceGradient(s, op, dy[0], false, dx);
    });

REGISTER_OP("WithinReplicaReduceScatter")
    .VariadicInput("shards")
    .Attr("op", "sum")
    .Attr("shard", int64_t{0})
    .SetShapeFn([](ShapeContext& c) { return ReduceShapeFn(c, true); })
    .SetKernel([](KernelContext& ctx) { return ReduceKernel(ctx, true); })
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) {
      return ReduceGradient(s, op, dy[0], true, dx);
    });

// The shards flattened and concatenated: [sum of their sizes].
REGISTER_OP("WithinReplicaAllGather")
    .VariadicInput("shards")
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      RETURN_IF_ERROR(CheckShards(c, /*reduce=*/false, Op::kLocal));
      int64_t total = 0;
      for (int i = 0; i < c.num_inputs(); ++i) {
        total += c.input_shape(i).num_elements();
      }
      c.set_output(0, c.input_dtype(0), TensorShape({total}));
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      int64_t total = 0;
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        total += ctx.input(i).NumElements();
      }
      ASSIGN_OR_RETURN(Tensor * y,
                       ctx.allocate_output(0, TensorShape({total})));
      auto* dst = static_cast<uint8_t*>(y->raw_data());
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        const size_t bytes = ctx.input(i).TotalBytes();
        if (bytes > 0) std::memcpy(dst, ctx.input(i).raw_data(), bytes);
        dst += bytes;
      }
      return absl::OkStatus();
    })
    // y = concat(flat x_j): dx_j is dy's slice at x_j's offset.
    .SetGradient([](const Scope& s, const Node& op, absl::Span<const Output> dy,
                    std::vector<Output>* dx) -> absl::Status {
      int64_t offset = 0;
      for (int j = 0; j < op.num_inputs(); ++j) {
        const TensorShape& shape = op.input(j).shape();
        const int64_t len = shape.num_elements();
        dx->push_back(Reshape(s, Slice(s, dy[0], {offset}, {len}), shape));
        offset += len;
      }
      return s.status();
    });

absl::Status CheckDistinct(const std::vector<Output>& shards) {
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!shards[i].valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input shard ", i, " is not a valid output"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (shards[i] == shards[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input shards ", j, " and ", i, " are the same tensor (",
            shards[i].name(), "); give each shard its own"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<Output> PerShard(const Scope& scope, const std::string& op_name,
                             const std::vector<Output>& shards,
                             const std::string& op) {
  if (absl::Status st = CheckDistinct(shards); !st.ok()) {
    scope.UpdateStatus(
        absl::InvalidArgumentError(absl::StrCat(op_name, ": ", st.message())));
    return {};
  }
  std::vector<Output> out;
  for (size_t i = 0; i < shards.size(); ++i) {
    AttrMap attrs;
    if (op_name != "WithinReplicaAllGather") {
      attrs = {{"op", op}, {"shard", static_cast<int64_t>(i)}};
    }
    Node* n =
        scope.WithIpu(static_cast<int>(i)).AddNode(op_name, shards, attrs);
    if (n == nullptr) return {};
    out.push_back(Output(n, 0));
  }
  return out;
}

}  // namespace

std::vector<Output> WithinReplicaAllReduce(
    const Scope& scope, const std::vector<Output>& input_shards,
    const std::string& op) {
  return PerShard(scope, "WithinReplicaAllReduce", input_shards, op);
}

std::vector<Output> WithinReplicaReduceScatter(
    const Scope& scope, const std::vector<Output>& input_shards,
    const std::string& op) {
  return PerShard(scope, "WithinReplicaReduceScatter", input_shards, op);
}

std::vector<Output> WithinReplicaAllGather(
    const Scope& scope, const std::vector<Output>& input_shards, int64_t axis) {
  std::vector<Output> flat =
      PerShard(scope, "WithinReplicaAllGather", input_shards, "");
  if (flat.empty()) return {};
  // Graphcore's shape: the inputs' concatenated along `axis` (scalars give
  // a vector); the elements stay in the flat concatenation's order.
  TensorShape shape = input_shards[0].shape();
  if (shape.rank() == 0) return flat;
  const int64_t rank = shape.rank();
  if (axis < 0 || axis >= rank) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("WithinReplicaAllGather: axis ", axis, " is outside [0, ",
                     rank, ") for shards of shape ", shape.DebugString())));
    return {};
  }
  for (size_t i = 1; i < input_shards.size(); ++i) {
    const TensorShape& s = input_shards[i].shape();
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && s.dim(d) != shape.dim(d)) {
        scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
            "WithinReplicaAllGather: shard ", i, " has shape ", s.DebugString(),
            "; every dimension but axis ", axis, " must match shard 0's ",
            input_shards[0].shape().DebugString())));
        return {};
      }
    }
    shape.set_dim(axis, shape.dim(axis) + s.dim(axis));
  }
  std::vector<Output> out;
  for (size_t i = 0; i < flat.size(); ++i) {
    out.push_back(Reshape(scope.WithIpu(static_cast<int>(i)), flat[i], shape));
  }
  return out;
}

}  // namespace ipuflow::ops
