#include "ops/state/assign_zeros.h"

#include <cstring>

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

// Bit for bit Assign(Zeros): from negative values (a -0.0 included) and
// from a value a read still holds (which must keep its old bits).
TEST(AssignZerosTest, IsAssignOfZerosAndLeavesReadValuesAlone) {
  const std::vector<float> init = {-1.5f, -0.0f, 3, 1e-40f};
  for (DType dtype : {DType::kFloat32, DType::kInt32}) {
    Scope s = Scope::NewRootScope();
    Tensor value = Tensor::FromVector<float>(init, {4});
    if (dtype == DType::kInt32) {
      value = Tensor::FromVector<int32_t>({-7, 0, 5, 1 << 30}, {4});
    }
    VariableHandle w = Variable(s.WithOpName("w"), Const(s, value));
    Node* zero = AssignZeros(s, w.handle);
    Session session(s.graph());
    ASSERT_TRUE(session.Initialize().ok());
    std::vector<Tensor> before, after;
    ASSERT_TRUE(session.Run({}, {w.value}, &before).ok());
    ASSERT_TRUE(session.Run({}, {}, {zero}, nullptr).ok());
    ASSERT_TRUE(session.Run({}, {w.value}, &after).ok());
    ASSERT_EQ(after[0].TotalBytes(), 16u);
    const char kZero[16] = {};
    EXPECT_EQ(std::memcmp(after[0].raw_data(), kZero, 16), 0);
    EXPECT_EQ(std::memcmp(before[0].raw_data(), value.raw_data(), 16), 0);
  }
}

TEST(AssignZerosTest, UninitialisedVariableNamesIt) {
  Scope s = Scope::NewRootScope();
  Output h = Variable(s.WithOpName("v"), DType::kFloat32, {2});
  Node* zero = AssignZeros(s.WithOpName("zero"), h);
  ASSERT_TRUE(s.ok()) << s.status();
  Session session(s.graph());
  absl::Status st = session.Run({}, {}, {zero}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(st.message()).find("'v'"), std::string::npos) << st;
}

}  // namespace
}  // namespace ipuflow::ops
