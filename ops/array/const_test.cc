#include "ops/array/const.h"

#include "core/testing/op_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::ops {
namespace {

using ::testing::HasSubstr;

// Issue 22: a dtype that holds no numbers was an abort in Tensor::Filled.
TEST(ConstTest, AResourceOrInvalidDTypeIsAnErrorNotAnAbort) {
  for (DType dtype : {DType::kResource, DType::kInvalid}) {
    Scope s = Scope::NewRootScope();
    Output c = Const(s, 1.0, dtype);
    EXPECT_FALSE(c.valid());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(DTypeName(dtype)));
  }
  EXPECT_FALSE(Tensor::Filled(DType::kResource, {2}, 1.0).valid());
}

TEST(ConstTest, FilledValuesOfEveryNumberDType) {
  Scope s = Scope::NewRootScope();
  Output i = Const(s, 3.0, DType::kInt64);
  Output b = Const(s, 1.0, DType::kBool);
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = ipuflow::testing::RunGraph(s, {}, {i, b});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 3);
  EXPECT_TRUE((*out)[1].scalar<bool>());
}

TEST(PlaceholderTest, AResourcePlaceholderIsRefused) {
  Scope s = Scope::NewRootScope();
  Output p = Placeholder(s, DType::kResource, {});
  EXPECT_FALSE(p.valid());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("Placeholder"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("resource"));
}

}  // namespace
}  // namespace ipuflow::ops
