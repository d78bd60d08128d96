// Checks a float16 graph against its float32 twin: the same builder run
// once on float32 inputs and once on float16 ones, forward values and
// gradients compared within float16 tolerance. The float32 twin is fed the
// float16-rounded inputs, so only the computation's rounding differs.
//
//   auto build = [](const Scope& s, const std::vector<Output>& x) {
//     return ops::Relu(s, x[0]);
//   };
//   absl::StatusOr<HalfCheck> c =
//       CompareHalfToFloat(build, {RandomTensor({4, 5}, -1, 1, 1)});
//   ASSERT_TRUE(c.ok()) << c.status();
//   EXPECT_EQ(c->dtype, DType::kFloat16);
//   EXPECT_LT(c->forward_error, 2e-3);
//   EXPECT_LT(c->gradient_error, 2e-3);
//
// For tests only; builds fresh graphs, safe from any thread.
#ifndef IPUFLOW_OPS_TESTING_HALF_CHECK_H_
#define IPUFLOW_OPS_TESTING_HALF_CHECK_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scope.h"
#include "core/tensor.h"

namespace ipuflow::testing {

// Builds the output under test from one Placeholder per input value.
using HalfCheckBuilder =
    std::function<Output(const Scope&, const std::vector<Output>&)>;

struct HalfCheck {
  DType dtype = DType::kInvalid;  // The float16 build's output dtype.
  // max |y16 - y32| / max |y32| (scale-relative; 0 for all-zero outputs).
  double forward_error = 0;
  // The same for d(sum(r * y))/dx (fixed random r), the largest over the
  // float inputs; 0 without gradients.
  double gradient_error = 0;
};

// float32 values are fed as float16 to the float16 build; other dtypes
// (labels, lengths) are fed unchanged to both. With `gradients`, both
// builds are differentiated with respect to every float input.
absl::StatusOr<HalfCheck> CompareHalfToFloat(const HalfCheckBuilder& build,
                                             const std::vector<Tensor>& values,
                                             bool gradients = true);

// A float32 tensor as float16 (nearest even), and back.
Tensor ToHalf(const Tensor& t);
Tensor ToFloat(const Tensor& t);

}  // namespace ipuflow::testing

#endif  // IPUFLOW_OPS_TESTING_HALF_CHECK_H_
