#include "ops/state/initializers.h"

#include <cmath>

#include "ops/state/random.h"

namespace ipuflow::ops {
namespace {

struct Fans {
  double in = 1, out = 1;
};

// REQUIRES: shape fully defined (RandomUniform checks and reports it).
Fans ComputeFans(const TensorShape& shape) {
  const int r = shape.rank();
  if (r == 0) return {};
  if (r == 1)
    return {static_cast<double>(shape.dim(0)),
            static_cast<double>(shape.dim(0))};
  const double receptive = static_cast<double>(shape.DimProduct(0, r - 2));
  return {shape.dim(r - 2) * receptive, shape.dim(r - 1) * receptive};
}

}  // namespace

Output GlorotUniform(const Scope& scope, const TensorShape& shape, int64_t seed,
                     DType dtype) {
  const Fans f = ComputeFans(shape);
  const double sum = f.in + f.out;
  const float limit = sum > 0 ? static_cast<float>(std::sqrt(6.0 / sum)) : 0.f;
  return RandomUniform(scope, shape, -limit, limit, seed, dtype);
}

Output Zeros(const Scope& scope, const TensorShape& shape, DType dtype) {
  return scope.AddNode("Fill", {},
                       {{"shape", shape}, {"value", 0.0f}, {"dtype", dtype}},
                       "Zeros");
}

}  // namespace ipuflow::ops
