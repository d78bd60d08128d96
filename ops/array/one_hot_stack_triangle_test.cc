// OneHot, Stack, Tril / Triu: hand-checked values, errors, gradients.
#include <cmath>
#include <limits>
#include <tuple>

#include "core/gradients.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/one_hot.h"
#include "ops/array/stack.h"
#include "ops/array/triangle.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

std::string ErrorOf(const Scope& s) {
  return std::string(s.status().message());
}

TEST(OneHotTest, ValuesAxesAndOutOfRange) {
  Scope s = Scope::NewRootScope();
  Output ids = Const<int32_t>(s, {0, 2, -1, 3}, {4});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, OneHot(s, ids, 3)),
                         {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {4, 3}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, OneHot(s, ids, 3, 0, 5, -1)),
                         {5, -1, -1, -1, -1, -1, -1, -1, -1, 5, -1, -1},
                         {3, 4}));
  Output ids2 = Const<int64_t>(s, {1, 0, 0, 1}, {2, 2});
  Tensor h = RunOne(s, {}, OneHot(s, ids2, 2, 1, 1, 0, DType::kInt32));
  EXPECT_EQ(h.shape(), TensorShape({2, 2, 2}));
  // y[a, k, b] = ids2[a, b] == k.
  const int32_t want[] = {0, 1, 1, 0, 1, 0, 0, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(h.data<int32_t>()[i], want[i]) << i;
  Tensor half16 = RunOne(s, {}, OneHot(s, ids, 3, -1, 1, 0, DType::kFloat16));
  EXPECT_EQ(static_cast<float>(half16.data<half>()[5]), 1.f);
}

TEST(OneHotTest, Errors) {
  Scope s = Scope::NewRootScope();
  OneHot(s.WithOpName("h"), Const<float>(s, {1}, {1}), 3);
  EXPECT_NE(ErrorOf(s).find("OneHot 'h'"), std::string::npos) << ErrorOf(s);
  EXPECT_NE(ErrorOf(s).find("is float32; expected int32 or int64"),
            std::string::npos)
      << ErrorOf(s);
  Scope s2 = Scope::NewRootScope();
  OneHot(s2, Const<int32_t>(s2, {1}, {1}), -2);
  EXPECT_NE(ErrorOf(s2).find("depth is -2; expected >= 0"), std::string::npos);
  Scope s3 = Scope::NewRootScope();
  OneHot(s3, Const<int32_t>(s3, {1}, {1}), 2, 3);
  EXPECT_NE(ErrorOf(s3).find("axis 3 is out of range"), std::string::npos)
      << ErrorOf(s3);
  Scope s4 = Scope::NewRootScope();
  OneHot(s4, Const<int32_t>(s4, {1, 2}, {2}), int64_t{1} << 62);
  EXPECT_FALSE(s4.ok());
  // Integer outputs hold on / off exactly or are refused (the cast of
  // 1e30 to int32 is undefined behaviour).
  for (auto [on, off, dtype] : {std::tuple{1e30f, 0.f, DType::kInt32},
                                std::tuple{1.f, 0.5f, DType::kInt64},
                                std::tuple{NAN, 0.f, DType::kInt64},
                                std::tuple{3e9f, 0.f, DType::kInt32}}) {
    Scope s5 = Scope::NewRootScope();
    OneHot(s5, Const<int32_t>(s5, {1}, {1}), 2, -1, on, off, dtype);
    EXPECT_NE(ErrorOf(s5).find("is not an integer that"), std::string::npos)
        << on << " " << off << ": " << ErrorOf(s5);
  }
  Scope s6 = Scope::NewRootScope();
  OneHot(s6, Const<int32_t>(s6, {1}, {1}), 2, -1, -2147483648.f, 7.f,
         DType::kInt32);
  EXPECT_TRUE(s6.ok()) << s6.status();
}

TEST(StackTest, ValuesAndAxes) {
  Scope s = Scope::NewRootScope();
  Output a = Const<float>(s, {1, 2, 3, 4}, {2, 2});
  Output b = Const<float>(s, {5, 6, 7, 8}, {2, 2});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Stack(s, {a, b})),
                         {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Stack(s, {a, b}, 1)),
                         {1, 2, 5, 6, 3, 4, 7, 8}, {2, 2, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Stack(s, {a, b}, -1)),
                         {1, 5, 2, 6, 3, 7, 4, 8}, {2, 2, 2}));
  Output c = Const<int32_t>(s, {7}, {});
  Tensor v = RunOne(s, {}, Stack(s, {c, c, c}));
  EXPECT_EQ(v.shape(), TensorShape({3}));
  EXPECT_EQ(v.data<int32_t>()[2], 7);
}

TEST(StackTest, Errors) {
  Scope s = Scope::NewRootScope();
  Stack(s.WithOpName("st"),
        {Const<float>(s, {1, 2}, {2}), Const<float>(s, {1, 2, 3}, {3})});
  EXPECT_NE(ErrorOf(s).find("Stack 'st'"), std::string::npos) << ErrorOf(s);
  EXPECT_NE(ErrorOf(s).find("has shape [3] but"), std::string::npos)
      << ErrorOf(s);
  Scope s2 = Scope::NewRootScope();
  Stack(s2, {Const<float>(s2, {1, 2}, {2})}, 2);
  EXPECT_NE(ErrorOf(s2).find("axis 2 is out of range"), std::string::npos)
      << ErrorOf(s2);
}

TEST(StackTest, Gradient) {
  for (int64_t axis : {0, 1, -1}) {
    Scope s = Scope::NewRootScope();
    Output a = Placeholder(s, DType::kFloat32, {2, 3});
    Output b = Placeholder(s, DType::kFloat32, {2, 3});
    auto err = MaxGradientError(
        s, {a, b},
        {RandomTensor({2, 3}, -1, 1, 1), RandomTensor({2, 3}, -1, 1, 2)},
        Stack(s, {a, b}, axis));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3);
  }
}

TEST(TriangleTest, ValuesAndDiagonals) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tril(s, x)),
                         {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, {3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Triu(s, x)),
                         {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}, {3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tril(s, x, -1)),
                         {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}, {3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Triu(s, x, 2)),
                         {0, 0, 3, 4, 0, 0, 0, 8, 0, 0, 0, 0}, {3, 4}));
  // Extreme diagonals clamp (no overflow): everything or nothing.
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tril(s, x, big)),
                         {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Tril(s, x, -big)),
                         std::vector<float>(12, 0), {3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Triu(s, x, -big)),
                         {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}));
  // Batched: each matrix alike.
  Output b = Const<int32_t>(s, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor t = RunOne(s, {}, Tril(s, b));
  const int32_t want[] = {1, 0, 3, 4, 5, 0, 7, 8};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.data<int32_t>()[i], want[i]);
  Tril(s.WithOpName("t"), Const<float>(s, {1, 2}, {2}));
  EXPECT_NE(ErrorOf(s).find("Tril 't'"), std::string::npos);
  EXPECT_NE(ErrorOf(s).find("expected rank >= 2"), std::string::npos)
      << ErrorOf(s);
}

TEST(TriangleTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 3});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3, 3}, -1, 1, 3)},
                              Triu(s, Tril(s, x, 1), -1));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
