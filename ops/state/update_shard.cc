#include "ops/state/update_shard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_device.h"

namespace ipuflow::ops {
int64_t UpdateShard::Begin(int64_t n) const {
  return std::min(n, index * ChunkSize(n));
}

int64_t UpdateShard::End(int64_t n) const {
  return std::min(n, Begin(n) + ChunkSize(n));
}

absl::StatusOr<UpdateShard> ShardInput(const KernelContext& ctx, int i) {
  if (ctx.num_inputs() <= i) return UpdateShard{};
  const Tensor& t = ctx.input(i);
  const int32_t* s = t.data<int32_t>();
  if (t.NumElements() != 2 || s[1] < 1 || s[0] < 0 || s[0] >= s[1]) {
    return ctx.InvalidArgument(
        "shard must be {index, count} with 0 <= index < "
        "count, got ",
        t.NumElements() == 2 ? absl::StrCat("{", s[0], ", ", s[1], "}")
                             : t.shape().DebugString());
  }
  return UpdateShard{s[0], s[1]};
}

absl::Status ExpectShardInput(const ShapeContext& c, int i) {
  if (c.num_inputs() <= i) return absl::OkStatus();
  RETURN_IF_ERROR(c.ExpectDType(i, DType::kInt32));
  const TensorShape& s = c.input_shape(i);
  if (s.rank() != 1 || (s.dim(0) >= 0 && s.dim(0) != 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard must be an int32 [2] {index, count}, got ", s.DebugString()));
  }
  return absl::OkStatus();
}

void CountUpdatedElements(const KernelContext& ctx, int64_t elements) {
  IPUDevice* device = ctx.env().device;
  if (device == nullptr) return;
  device->counters().updated_elements.fetch_add(elements,
                                                std::memory_order_relaxed);
}

}  // namespace ipuflow::ops
