// ScatterAdd and TakeAlongAxis: hand-checked values, errors, gradients.
#include "ops/array/scatter_add.h"

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(ScatterAddTest, ValuesRepeatedIndicesAndAxes) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 1, 1, 1, 1, 1}, {2, 3});
  // Row 0 adds 10 and 20 at column 2 (repeated), row 1 adds 5 at column 0.
  Output idx = Const<int32_t>(s, {2, 2, 0, 1}, {2, 2});
  Output upd = Const<float>(s, {10, 20, 5, 7}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ScatterAdd(s, x, idx, upd, 1)),
                         {1, 1, 31, 6, 8, 1}, {2, 3}));
  // Along axis 0: idx [1, 3] picks rows per column.
  Output idx0 = Const<int64_t>(s, {1, 0, 1}, {1, 3});
  Output upd0 = Const<float>(s, {2, 3, 4}, {1, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, ScatterAdd(s, x, idx0, upd0, 0)),
                         {1, 4, 1, 3, 1, 5}, {2, 3}));
  Output src = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, TakeAlongAxis(s, src, idx, 1)),
                         {3, 3, 4, 5}, {2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, TakeAlongAxis(s, src, idx0, 0)),
                         {4, 2, 6}, {1, 3}));
}

TEST(ScatterAddTest, Errors) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Output bad = Const<int32_t>(s, {0, 3}, {2, 1});
  Output r = TakeAlongAxis(s.WithOpName("t"), x, bad, 1);
  auto out = RunGraph(s, {}, {r});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(
                "TakeAlongAxis 't': input 'indices' holds 3 at flat position "
                "1, outside [0, 3) for axis 1"),
            std::string::npos)
      << out.status();
  Scope s2 = Scope::NewRootScope();
  ScatterAdd(s2.WithOpName("sa"), Const<float>(s2, {1, 2, 3, 4}, {2, 2}),
             Const<int32_t>(s2, {0, 1, 0}, {3, 1}),
             Const<float>(s2, {1, 2, 3}, {3, 1}), 1);
  EXPECT_NE(s2.status().message().find("ScatterAdd 'sa'"), std::string::npos);
  EXPECT_NE(s2.status().message().find("must match except at axis 1"),
            std::string::npos)
      << s2.status();
}

TEST(ScatterAddTest, Gradients) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3});
  Output u = Placeholder(s, DType::kFloat32, {2, 4});
  Output idx = Const<int32_t>(s, {0, 2, 2, 1, 1, 1, 0, 2}, {2, 4});
  auto err = MaxGradientError(
      s, {x, u},
      {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({2, 4}, -1, 1, 2)},
      ScatterAdd(s, x, idx, u, 1));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
  Scope s2 = Scope::NewRootScope();
  Output y = Placeholder(s2, DType::kFloat32, {2, 3});
  Output idx2 = Const<int32_t>(s2, {0, 2, 2, 1, 1, 1, 0, 2}, {2, 4});
  err = MaxGradientError(s2, {y}, {RandomTensor({2, 3}, -1, 1, 3)},
                         TakeAlongAxis(s2, y, idx2, 1));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
