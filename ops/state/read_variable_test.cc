#include "ops/state/read_variable.h"

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/math/add.h"
#include "ops/state/assign.h"
#include "ops/state/variable.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

std::string ReadMessage(const absl::Status& s) {
  return std::string(s.message());
}

TEST(ReadVariableTest, ReadsTheValue) {
  Scope s = Scope::NewRootScope();
  VariableHandle w =
      Variable(s.WithOpName("w"), Const<int32_t>(s, {1, 2, 3}, {3}));
  Output r = ReadVariable(s, w.handle);
  EXPECT_EQ(r.dtype(), DType::kInt32);
  EXPECT_EQ(r.shape(), TensorShape({3}));
  EXPECT_TRUE(TensorNear(testing::RunOne(s, {}, r), {1, 2, 3}, {3}));
}

TEST(ReadVariableTest, CopiesRatherThanAliases) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Node* inc = AssignAdd(s, w.handle, Const<float>(s, {10, 10}, {2}));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> before, after;
  ASSERT_TRUE(session.Run({}, {w.value}, &before).ok());
  ASSERT_TRUE(session.Run({}, {}, {inc}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &after).ok());
  EXPECT_TRUE(TensorNear(before[0], {1, 2}, {2}));  // Unchanged by the update.
  EXPECT_TRUE(TensorNear(after[0], {11, 12}, {2}));
}

// A read shares the value's buffer (no copy) until a write, which copies
// it first: the earlier read keeps its bits. (A read while an earlier read
// is still held copies once, under the variable's lock.)
TEST(ReadVariableTest, SharesTheBufferUntilAWrite) {
  Scope s = Scope::NewRootScope();
  VariableHandle w = Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
  Node* inc = AssignAdd(s, w.handle, Const<float>(s, {10, 10}, {2}));
  Session session(s.graph());
  ASSERT_TRUE(session.Initialize().ok());
  std::vector<Tensor> first, second, third;
  ASSERT_TRUE(session.Run({}, {w.value}, &first).ok());
  const void* buffer = first[0].raw_data();
  // Held by the variable and by this read.
  EXPECT_EQ(first[0].buffer().use_count(), 2);
  first.clear();
  ASSERT_TRUE(session.Run({}, {w.value}, &second).ok());
  EXPECT_EQ(second[0].raw_data(), buffer);  // The same buffer: no copy.
  EXPECT_EQ(second[0].buffer().use_count(), 2);
  ASSERT_TRUE(session.Run({}, {}, {inc}, nullptr).ok());
  ASSERT_TRUE(session.Run({}, {w.value}, &third).ok());
  EXPECT_NE(third[0].raw_data(), second[0].raw_data());
  EXPECT_EQ(second[0].buffer().use_count(), 1);  // The variable moved on.
  EXPECT_TRUE(TensorNear(second[0], {1, 2}, {2}));
  EXPECT_TRUE(TensorNear(third[0], {11, 12}, {2}));
}

// Reads and writes of one variable run in creation order, whatever the
// executor's parallelism.
TEST(ReadVariableTest, ReadThenAssignInOneRunSeesTheOldValue) {
  for (int threads : {0, 4}) {
    Scope s = Scope::NewRootScope();
    VariableHandle w =
        Variable(s.WithOpName("w"), Const<float>(s, {1, 2}, {2}));
    Output before = Add(s, w.value, Const<float>(s, {0, 0}, {2}));
    Node* assign = Assign(s, w.handle, Const<float>(s, {5, 6}, {2}));
    Output after = ReadVariable(s, w.handle);
    Session session(s.graph(), {/*intra_op_threads=*/2, threads});
    ASSERT_TRUE(session.Initialize().ok());
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({}, {before, after}, {assign}, &out).ok());
    EXPECT_TRUE(TensorNear(out[0], {1, 2}, {2})) << threads << " threads";
    EXPECT_TRUE(TensorNear(out[1], {5, 6}, {2})) << threads << " threads";
  }
}

TEST(ReadVariableTest, HandleMustComeFromAVariable) {
  Scope s = Scope::NewRootScope();
  ReadVariable(s, Const<float>(s, {1}, {1}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ReadMessage(s.status())
                .find("ReadVariable: 'Const:0' is not a "
                      "variable handle"),
            std::string::npos)
      << s.status();
}

TEST(ReadVariableTest, AttributesMustDescribeAVariable) {
  Scope s = Scope::NewRootScope();
  Output h = Variable(s, DType::kFloat32, {2});
  s.WithOpName("bad").AddNode(
      "ReadVariable", {h},
      {{"dtype", DType::kFloat32}, {"shape", TensorShape({-1})}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ReadMessage(s.status()).find("ReadVariable 'bad'"),
            std::string::npos)
      << s.status();
  EXPECT_NE(ReadMessage(s.status()).find("float32[?]"), std::string::npos)
      << s.status();
}

TEST(ReadVariableTest, RunTimeMismatchIsAnError) {
  // Attributes that disagree with the variable itself (built by hand).
  Scope s = Scope::NewRootScope();
  Output h = Variable(s.WithOpName("w"), DType::kFloat32, {2});
  Output r = s.WithOpName("bad").AddNode(
      "ReadVariable", {h},
      {{"dtype", DType::kFloat32}, {"shape", TensorShape({3})}});
  Session session(s.graph());
  std::vector<Tensor> out;
  absl::Status st = session.Run({}, {r}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ReadMessage(st).find("ReadVariable 'bad'"), std::string::npos)
      << st;
  EXPECT_NE(ReadMessage(st).find("variable 'w' is float32[2]"),
            std::string::npos)
      << st;
}

}  // namespace
}  // namespace ipuflow::ops
