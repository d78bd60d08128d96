#include "ops/loss/loss_util.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ipuflow::ops {

absl::StatusOr<Reduction> ParseReduction(const std::string& name) {
  if (name == "none") return Reduction::kNone;
  if (name == "sum") return Reduction::kSum;
  if (name == "mean") return Reduction::kMean;
  if (name == "batchmean") return Reduction::kBatchMean;
  return absl::InvalidArgumentError(absl::StrCat(
      "reduction must be \"none\", \"sum\", \"mean\" or \"batchmean\", got \"",
      name, "\""));
}

TensorShape LossOutputShape(Reduction r, const TensorShape& elementwise) {
  return r == Reduction::kNone ? elementwise : TensorShape();
}

double ReductionScale(Reduction r, const TensorShape& shape) {
  switch (r) {
    case Reduction::kMean:
      return 1.0 / static_cast<double>(shape.num_elements());
    case Reduction::kBatchMean:
      return 1.0 / static_cast<double>(shape.rank() == 0 ? 1 : shape.dim(0));
    default:
      return 1.0;
  }
}

double DeterministicSum(const KernelContext& ctx, int64_t n,
                        double cost_per_element,
                        const std::function<double(int64_t)>& term) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(chunks, 0.0);
  ctx.ParallelFor(chunks, cost_per_element * kChunk, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      double s = 0;
      const int64_t end = std::min(n, (k + 1) * kChunk);
      for (int64_t i = k * kChunk; i < end; ++i) s += term(i);
      partial[k] = s;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace ipuflow::ops
