// Sort and TopK: hand-checked values, ties, NaN, errors, gradients.
#include "ops/math/sort.h"

#include <cmath>
#include <limits>

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

constexpr float kSortNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<int32_t> Ints(const Tensor& t) {
  return std::vector<int32_t>(t.data<int32_t>(),
                              t.data<int32_t>() + t.NumElements());
}

TEST(SortTest, AscendingDescendingStableNan) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {3, 1, kSortNaN, 1, 2}, {5});
  SortOutputs up = Sort(s, x);
  SortOutputs down = Sort(s, x, 0, true);
  auto out =
      RunGraph(s, {}, {up.values, up.indices, down.values, down.indices});
  ASSERT_TRUE(out.ok()) << out.status();
  const float* u = (*out)[0].data<float>();
  EXPECT_EQ(u[0], 1.f);
  EXPECT_EQ(u[3], 3.f);
  EXPECT_TRUE(std::isnan(u[4]));  // NaN last ascending (torch).
  EXPECT_EQ(Ints((*out)[1]), (std::vector<int32_t>{1, 3, 4, 0, 2}));
  EXPECT_TRUE(std::isnan((*out)[2].data<float>()[0]));  // First descending.
  EXPECT_EQ(Ints((*out)[3]), (std::vector<int32_t>{2, 0, 4, 1, 3}));
}

TEST(SortTest, AlongAnInnerAxis) {
  Scope s = Scope::NewRootScope();
  Output x = Const<int32_t>(s, {5, 1, 2, 6, 3, 4}, {3, 2});
  SortOutputs r = Sort(s, x, 0);
  auto out = RunGraph(s, {}, {r.values, r.indices});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Ints((*out)[0]), (std::vector<int32_t>{2, 1, 3, 4, 5, 6}));
  EXPECT_EQ(Ints((*out)[1]), (std::vector<int32_t>{1, 0, 2, 2, 0, 1}));
}

TEST(TopKTest, ValuesTiesAndErrors) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 4, 4, 2, 9, 0, 7, 7}, {2, 4});
  SortOutputs t = TopK(s, x, 3);
  auto out = RunGraph(s, {}, {t.values, t.indices});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(TensorNear((*out)[0], {4, 4, 2, 9, 7, 7}, {2, 3}));
  EXPECT_EQ(Ints((*out)[1]), (std::vector<int32_t>{1, 2, 3, 0, 2, 3}));
  TopK(s.WithOpName("k"), x, 5);
  EXPECT_NE(s.status().message().find("TopK 'k': k is 5 but the last "
                                      "dimension of input 'x' [2,4] has 4"),
            std::string::npos)
      << s.status();
}

TEST(SortTest, Gradients) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3, 5});
  const Tensor v = RandomTensor({3, 5}, -1, 1, 4);
  auto err = MaxGradientError(s, {x}, {v}, Sort(s, x, 0, true).values);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  err = MaxGradientError(s, {x}, {v}, TopK(s, x, 2).values);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  auto c = ::ipuflow::testing::CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        return TopK(s, x[0], 3).values;
      },
      {v});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->forward_error, 0);
}

}  // namespace
}  // namespace ipuflow::ops
