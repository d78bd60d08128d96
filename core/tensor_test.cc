#include "core/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace ipuflow {
namespace {

TEST(TensorShapeTest, ElementsAndDebugString) {
  TensorShape s({2, 3, 4});
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.DebugString(), "[2,3,4]");
  EXPECT_EQ(TensorShape().num_elements(), 1);
  EXPECT_EQ(TensorShape({-1, 3}).DebugString(), "[?,3]");
  EXPECT_EQ(TensorShape({-1, 3}).num_elements(), kUnknownDim);
}

TEST(TensorShapeTest, Compatibility) {
  EXPECT_TRUE(TensorShape({-1, 3}).IsCompatibleWith({8, 3}));
  EXPECT_FALSE(TensorShape({-1, 3}).IsCompatibleWith({8, 4}));
  EXPECT_FALSE(TensorShape({3}).IsCompatibleWith({3, 1}));
  auto merged = TensorShape::Merge({-1, 3}, {8, -1});
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(*merged, TensorShape({8, 3}));
}

TEST(TensorShapeTest, Broadcasting) {
  EXPECT_EQ(*BroadcastShapes({2, 1}, {3}), TensorShape({2, 3}));
  EXPECT_EQ(*BroadcastShapes({}, {4, 5}), TensorShape({4, 5}));
  EXPECT_EQ(*BroadcastShapes({-1, 10}, {10}), TensorShape({-1, 10}));
  auto bad = BroadcastShapes({3}, {2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("[3] and [2]"), std::string::npos);
}

TEST(TensorShapeTest, NormalizeAxis) {
  EXPECT_EQ(*NormalizeAxis(-1, 3), 2);
  EXPECT_FALSE(NormalizeAxis(3, 3).ok());
  EXPECT_FALSE(NormalizeAxis(-4, 3).ok());
}

TEST(TensorTest, AlignedAndTyped) {
  Tensor t(DType::kFloat32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
  EXPECT_EQ(t.TotalBytes(), 60u);
  t.flat<float>().setConstant(2.5f);
  EXPECT_EQ(t.data<float>()[14], 2.5f);
}

TEST(TensorTest, SliceIsZeroCopy) {
  Tensor t = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor row = t.Slice(1, 3);
  EXPECT_EQ(row.shape(), TensorShape({2, 2}));
  EXPECT_TRUE(row.SharesBufferWith(t));
  EXPECT_EQ(row.data<int32_t>()[0], 3);
  row.data<int32_t>()[0] = 30;
  EXPECT_EQ(t.data<int32_t>()[2], 30);
}

TEST(TensorTest, CopyIsDeep) {
  Tensor t = Tensor::FromVector<float>({1, 2});
  Tensor c = t.Copy();
  c.data<float>()[0] = 9;
  EXPECT_EQ(t.data<float>()[0], 1);
  EXPECT_FALSE(c.SharesBufferWith(t));
}

TEST(TensorTest, ReshapedSharesAndChecks) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = t.Reshaped({3, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->SharesBufferWith(t));
  EXPECT_EQ(t.Reshaped({4}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, HalfAndBool) {
  Tensor h = Tensor::Filled(DType::kFloat16, {2}, 1.5);
  EXPECT_EQ(h.TotalBytes(), 4u);
  EXPECT_EQ(static_cast<float>(h.data<half>()[1]), 1.5f);
  Tensor b = Tensor::FromVector<bool>({true, false});
  EXPECT_EQ(b.DebugString(), "bool[2] {1, 0}");
}

TEST(TensorTest, StackAddsLeadingDimension) {
  auto s = Stack({Tensor::FromVector<float>({1, 2}),
                  Tensor::FromVector<float>({3, 4})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape(), TensorShape({2, 2}));
  EXPECT_EQ(s->data<float>()[3], 4);
  auto bad = Stack({Tensor::FromVector<float>({1}),
                    Tensor::FromVector<float>({1, 2})});
  EXPECT_FALSE(bad.ok());
}

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kInt32,
                  DType::kInt64, DType::kBool}) {
    EXPECT_EQ(*DTypeFromName(DTypeName(d)), d);
  }
  EXPECT_FALSE(DTypeFromName("float64").ok());
}

}  // namespace
}  // namespace ipuflow
