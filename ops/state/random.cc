#include "ops/state/random.h"

#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/half.h"
#include "core/hash_mix.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "ops/cwise.h"

namespace ipuflow::ops {
namespace {

constexpr uint64_t kGamma = kGoldenGamma;
constexpr double kTwoPi = 6.283185307179586;
// Cycles per element for the cost model: a few 64-bit mixes, plus a log and
// a cosine for normals.
constexpr double kUniformCost = 20, kNormalCost = 80;

// A SplitMix64 stream for element `i` of one run (`key`): element values
// depend only on (key, i), never on the thread that computes them.
class ElementStream {
 public:
  ElementStream(uint64_t key, int64_t i)
      : state_(Mix64(key ^ Mix64(static_cast<uint64_t>(i) + 1))) {}
  uint64_t Next() { return Mix64(state_ += kGamma); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal, by Box-Muller (one of the pair).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]: log(u1) is finite.
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  }

 private:
  uint64_t state_;
};

// The key of this run: a function of the seed and the node's run count.
uint64_t NextRunKey(KernelContext& ctx) {
  std::unique_ptr<KernelState>& state = ctx.state();
  if (!state) state = std::make_unique<NodeRunCount>();
  auto* counter = static_cast<NodeRunCount*>(state.get());
  const int64_t seed = ctx.attr<int64_t>("seed");
  const uint64_t s =
      seed != 0 ? static_cast<uint64_t>(seed) : HashString(ctx.node().name());
  return Mix64(Mix64(s) + counter->runs++ * kGamma);
}

// Fills `out` with draw(stream) for each element's stream.
template <typename T, typename Draw>
void FillWith(KernelContext& ctx, uint64_t key, double cost, Draw& draw,
              Tensor* out) {
  T* p = out->data<T>();
  ctx.ParallelFor(out->NumElements(), cost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ElementStream rng(key, i);
      p[i] = static_cast<T>(draw(rng));
    }
  });
}

template <typename Draw>
absl::Status Generate(KernelContext& ctx, double cost, Draw draw) {
  const uint64_t key = NextRunKey(ctx);
  ASSIGN_OR_RETURN(Tensor * out,
                   ctx.allocate_output(0, ctx.attr<TensorShape>("shape")));
  IPUFLOW_SWITCH_FLOAT(out->dtype(), FillWith<T>(ctx, key, cost, draw, out),
                       return UnsupportedDType(ctx, out->dtype()));
  return absl::OkStatus();
}

// Shape, dtype and the two float parameters `a` <= `b` (when `ordered`) or
// `b` >= 0 (a standard deviation).
absl::Status RandomShape(ShapeContext& c, const char* a, const char* b,
                         bool ordered) {
  ASSIGN_OR_RETURN(TensorShape shape, c.attr<TensorShape>("shape"));
  ASSIGN_OR_RETURN(DType dtype, c.attr<DType>("dtype"));
  ASSIGN_OR_RETURN(float va, c.attr<float>(a));
  ASSIGN_OR_RETURN(float vb, c.attr<float>(b));
  RETURN_IF_ERROR(c.attr<int64_t>("seed").status());
  if (!shape.IsFullyDefined()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", shape.DebugString(), " must be fully defined"));
  }
  if (!IsFloating(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype must be float32 or float16, got ", DTypeName(dtype)));
  }
  if (ordered ? !(va <= vb) : !(vb >= 0)) {
    return absl::InvalidArgumentError(
        ordered ? absl::StrCat(a, " ", va, " must not exceed ", b, " ", vb)
                : absl::StrCat(b, " must be >= 0, got ", vb));
  }
  c.set_output(0, dtype, shape);
  return absl::OkStatus();
}

struct FloatAttr {
  const char* name;
  float default_value;
};

// Registers a random op with attributes shape, `a` and `b` (its two
// parameters), seed and dtype; element i of a run is draw(stream i, a, b).
template <typename Draw>
OpRegistration RegisterRandomOp(const std::string& name, FloatAttr a,
                                FloatAttr b, bool ordered, double cost,
                                Draw draw) {
  return OpRegistry::Global()
      ->Register(name)
      .RequiredAttr("shape", AttrType::kShape)
      .Attr(a.name, a.default_value)
      .Attr(b.name, b.default_value)
      .Attr("seed", 0)
      .Attr("dtype", DType::kFloat32)
      .SetStateful()
      .SetShapeFn([=](ShapeContext& c) {
        return RandomShape(c, a.name, b.name, ordered);
      })
      .SetKernel([=](KernelContext& ctx) {
        const double va = ctx.attr<float>(a.name);
        const double vb = ctx.attr<float>(b.name);
        return Generate(ctx, cost,
                        [&](ElementStream& rng) { return draw(rng, va, vb); });
      })
      .NotDifferentiable("random values do not depend on any input");
}

[[maybe_unused]] const OpRegistration kRandomUniform = RegisterRandomOp(
    "RandomUniform", {"minval", 0.0f}, {"maxval", 1.0f}, /*ordered=*/true,
    kUniformCost, [](ElementStream& rng, double lo, double hi) {
      return lo + (hi - lo) * rng.Uniform();
    });

[[maybe_unused]] const OpRegistration kRandomNormal = RegisterRandomOp(
    "RandomNormal", {"mean", 0.0f}, {"stddev", 1.0f}, /*ordered=*/false,
    kNormalCost, [](ElementStream& rng, double mean, double stddev) {
      return mean + stddev * rng.Normal();
    });

[[maybe_unused]] const OpRegistration kTruncatedNormal = RegisterRandomOp(
    "TruncatedNormal", {"mean", 0.0f}, {"stddev", 1.0f}, /*ordered=*/false,
    kNormalCost * 1.05, [](ElementStream& rng, double mean, double stddev) {
      // P(|z| > 2) ~ 4.6%, so a redraw is rare and a second one rarer.
      double z = rng.Normal();
      while (std::abs(z) > 2.0) z = rng.Normal();
      return mean + stddev * z;
    });

AttrMap RandomAttrs(const TensorShape& shape, const char* a, float va,
                    const char* b, float vb, int64_t seed, DType dtype) {
  return {{"shape", shape}, {a, va}, {b, vb}, {"seed", seed}, {"dtype", dtype}};
}

}  // namespace

Output RandomUniform(const Scope& scope, const TensorShape& shape, float minval,
                     float maxval, int64_t seed, DType dtype) {
  return scope.AddNode(
      "RandomUniform", {},
      RandomAttrs(shape, "minval", minval, "maxval", maxval, seed, dtype));
}

Output RandomNormal(const Scope& scope, const TensorShape& shape, float mean,
                    float stddev, int64_t seed, DType dtype) {
  return scope.AddNode(
      "RandomNormal", {},
      RandomAttrs(shape, "mean", mean, "stddev", stddev, seed, dtype));
}

Output TruncatedNormal(const Scope& scope, const TensorShape& shape, float mean,
                       float stddev, int64_t seed, DType dtype) {
  return scope.AddNode(
      "TruncatedNormal", {},
      RandomAttrs(shape, "mean", mean, "stddev", stddev, seed, dtype));
}

}  // namespace ipuflow::ops
