#include "ops/array/print.h"

#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(PrintTest, ForwardsAndWritesASummary) {
  Scope s = Scope::NewRootScope();
  Output y = Print(s, Const<float>(s, {1, 2.5, 3, 4}, {2, 2}), "x is ");
  ::testing::internal::CaptureStderr();
  Tensor out = RunOne(s, {}, y);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(TensorNear(out, {1, 2.5, 3, 4}, {2, 2}));
  EXPECT_NE(err.find("x is float32[2,2] {1, 2.5, 3, ...}\n"), std::string::npos)
      << err;
}

TEST(PrintTest, SummarizeBoundsTheValues) {
  Scope s = Scope::NewRootScope();
  Output y = Print(s, Const<int32_t>(s, {7, 8}, {2}), "", /*summarize=*/5);
  ::testing::internal::CaptureStderr();
  RunOne(s, {}, y);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("int32[2] {7, 8}\n"),
            std::string::npos);
}

TEST(PrintTest, NegativeSummarizeIsAnError) {
  Scope s = Scope::NewRootScope();
  Print(s.WithOpName("p"), Const(s, 1.0f), "", -1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("Print 'p': summarize is -1"),
            std::string::npos)
      << s.status();
}

TEST(PrintTest, GradientIsIdentity) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {3});
  Output y = Print(s, x, "grad check: ");
  ::testing::internal::CaptureStderr();  // Keep the test log quiet.
  auto err =
      MaxGradientError(s, {x}, {Tensor::FromVector<float>({1, -2, 3})}, y);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

}  // namespace
}  // namespace ipuflow::ops
