#include "ops/cwise.h"

namespace ipuflow::ops {

std::vector<int64_t> BroadcastStrides(const TensorShape& in,
                                      const TensorShape& out) {
  std::vector<int64_t> strides(out.rank(), 0);
  int64_t stride = 1;
  for (int d = out.rank() - 1, i = in.rank() - 1; d >= 0; --d, --i) {
    if (i < 0) break;
    strides[d] = in.dim(i) == 1 ? 0 : stride;
    stride *= in.dim(i);
  }
  return strides;
}

}  // namespace ipuflow::ops
