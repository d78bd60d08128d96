#include "ops/array/pad.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(PadTest, ZerosBeforeAndAfter) {
  Scope s = Scope::NewRootScope();
  Output y = Pad(s, Const<float>(s, {1, 2, 3, 4}, {2, 2}), {1, 0, 0, 2});
  EXPECT_EQ(y.shape(), TensorShape({3, 4}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0},
                         {3, 4}));
}

TEST(PadTest, ConstantValueAndDTypes) {
  Scope s = Scope::NewRootScope();
  Output f = Pad(s, Const<float>(s, {5}, {1}), {2, 1}, -1.5f);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, f), {-1.5, -1.5, 5, -1.5}, {4}));
  Output i = Pad(s, Const<int32_t>(s, {7, 8}, {1, 2}), {1, 1, 2, 0}, 3.0f);
  EXPECT_TRUE(TensorNear(RunOne(s, {}, i), {3, 3, 3, 3, 3, 3, 7, 8, 3, 3, 3, 3},
                         {3, 4}));
  Output h = Pad(s, Const(s, Tensor::Filled(DType::kFloat16, {1, 1}, 2.0)),
                 {0, 1, 1, 0});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, h), {0, 2, 0, 0}, {2, 2}));
  Output none = Pad(s, Const<int64_t>(s, {1, 2}, {2}), {0, 0});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, none), {1, 2}, {2}));
}

// The paddings once reported as miscompiled by GCC 12.2 with -mavx512f (the
// int64 initializer {1, 1, 1, 0} read back as all ones, docs/ARCHITECTURE.md
// "Decisions"). Run under --config=avx512 (x86-64-v4) to check the compiler.
TEST(PadTest, TrailingZeroPaddingInt64Initializer) {
  Scope s = Scope::NewRootScope();
  Output i = Pad(s, Const<int32_t>(s, {7, 8}, {1, 2}), {1, 1, 1, 0}, 3.0f);
  EXPECT_EQ(i.shape(), TensorShape({3, 3}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, i), {3, 3, 3, 3, 7, 8, 3, 3, 3}, {3, 3}));
  const std::vector<int64_t> paddings = {1, 1, 1, 0};
  EXPECT_EQ(paddings, (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(paddings.back(), 0);
}

TEST(PadTest, UnknownDimension) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 1});
  Output y = Pad(s, x, {0, 1, 1, 1});
  EXPECT_EQ(y.shape().DebugString(), "[?,3]");
  Tensor xv = Tensor::FromVector<float>({4, 5}, {2, 1});
  EXPECT_TRUE(
      TensorNear(RunOne(s, {{x, xv}}, y), {0, 4, 0, 0, 5, 0, 0, 0, 0}, {3, 3}));
}

TEST(PadTest, WrongLengthNamesPaddingsAndShape) {
  Scope s = Scope::NewRootScope();
  Pad(s.WithOpName("p"), Const<float>(s, {1, 2, 3, 4}, {2, 2}), {1, 1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(s.status().message());
  EXPECT_NE(msg.find("Pad 'p': paddings [1,1] has 2 values; input 'x' of "
                     "shape [2,2] needs 4"),
            std::string::npos)
      << msg;
}

TEST(PadTest, NegativePaddingIsAnError) {
  Scope s = Scope::NewRootScope();
  Pad(s.WithOpName("p"), Const<float>(s, {1, 2}, {2}), {0, -1});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.status().message().find("Pad 'p': paddings [0,-1] has a negative"),
      std::string::npos)
      << s.status();
}

TEST(PadTest, GradientViaSlice) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 2});
  Output y = Pad(s, x, {1, 0, 2, 1, 0, 3}, 0.5f);
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3, 2}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(PadTest, GradientWithUnknownDimension) {
  // The "after" padding of the unknown dimension makes the gradient a
  // StridedSlice ending at -after.
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 3});
  Output y = Pad(s, x, {1, 2, 0, 1});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(PadTest, ReflectSymmetricReplicate) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3}, {3});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Pad(s, x, {2, 2}, "reflect")),
                         {3, 2, 1, 2, 3, 2, 1}, {7}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Pad(s, x, {2, 2}, "symmetric")),
                         {2, 1, 1, 2, 3, 3, 2}, {7}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, Pad(s, x, {2, 3}, "replicate")),
                         {1, 1, 1, 2, 3, 3, 3, 3}, {8}));
  // 2-D: tf.pad([[1,2,3],[4,5,6]], [[1,1],[2,2]], "REFLECT").
  Output m = Const<int32_t>(s, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = RunOne(s, {}, Pad(s, m, {1, 1, 2, 2}, "reflect"));
  const int32_t want[] = {6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1,
                          6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1};
  ASSERT_EQ(r.shape(), TensorShape({4, 7}));
  for (int i = 0; i < 28; ++i) EXPECT_EQ(r.data<int32_t>()[i], want[i]) << i;
}

TEST(PadTest, ModeLimitsAreErrors) {
  Scope s = Scope::NewRootScope();
  Pad(s.WithOpName("p"), Const<float>(s, {1, 2, 3}, {3}), {3, 0}, "reflect");
  EXPECT_NE(s.status().message().find("Pad 'p': paddings [3,0] for dimension "
                                      "0 of input 'x' (shape [3]) exceed 2"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  Pad(s2, Const<float>(s2, {1, 2, 3}, {3}), {1, 0}, "wrap");
  EXPECT_NE(s2.status().message().find("mode is 'wrap'; expected constant"),
            std::string::npos)
      << s2.status();
  Scope s3 = Scope::NewRootScope();
  Pad(s3, Const(s3, Tensor(DType::kFloat32, {0})), {1, 0}, "replicate");
  EXPECT_FALSE(s3.ok());
}

TEST(PadTest, ModeGradients) {
  for (const char* mode : {"reflect", "symmetric", "replicate"}) {
    Scope s = Scope::NewRootScope();
    Output x = Placeholder(s, DType::kFloat32, {3, 4});
    auto err = MaxGradientError(s, {x}, {RandomTensor({3, 4}, -1, 1, 2)},
                                Pad(s, x, {2, 1, 3, 2}, std::string(mode)));
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-3) << mode;
  }
}

}  // namespace
}  // namespace ipuflow::ops
