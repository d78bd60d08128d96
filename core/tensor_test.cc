#include "core/tensor.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/tensor_eigen.h"
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

TEST(TensorShapeTest, CheckedArithmetic) {
  const int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_TRUE(ValidateShape(TensorShape({-1, 1 << 20, 1 << 20})).ok());
  EXPECT_TRUE(ValidateShape(TensorShape({big, big, 0})).ok());  // 0 elements.
  absl::Status s = ValidateShape(TensorShape({big, 4}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[4611686018427387905,4]"), std::string::npos)
      << s;
  EXPECT_EQ(ValidateShape(TensorShape({2, -5})).code(),
            absl::StatusCode::kInvalidArgument);
  // Just over the limit, without wrapping.
  EXPECT_FALSE(ValidateShape(TensorShape({1 << 24, 1 << 24, 2})).ok());
  EXPECT_TRUE(ValidateShape(TensorShape({1 << 24, 1 << 24})).ok());
  EXPECT_EQ(TensorShape({big, 4}).num_elements(), INT64_MAX);  // Saturates.
  EXPECT_EQ(TensorShape({big, 4, 0}).num_elements(), 0);
  EXPECT_EQ(*TensorShape({3, 5}).CheckedNumElements(), 15);
  EXPECT_FALSE(TensorShape({3, -1}).CheckedNumElements().ok());
  EXPECT_EQ(*CheckedByteSize(10, 4, "x"), 40);
  EXPECT_EQ(CheckedByteSize(kMaxTensorElements, 2, "f16[...]").status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*PaddedDim(3, 1, 2), 6);
  EXPECT_FALSE(PaddedDim(3, INT64_MAX, 1).ok());
  EXPECT_FALSE(PaddedDim(3, -1, 1).ok());
  int64_t out = 7;
  EXPECT_FALSE(CheckedMul(INT64_MAX, 2, &out));
  EXPECT_TRUE(CheckedAdd(1, 2, &out));
  EXPECT_EQ(out, 3);
}

// The usage examples of core/tensor_eigen.h and core/half.h.
TEST(TensorTest, EigenViewsAndHalfHeaderExamples) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  float sum = t.flat<float>().sum();           // 10
  float corner = t.matrix<float>(2, 2)(1, 1);  // 4
  EXPECT_EQ(sum, 10);
  EXPECT_EQ(corner, 4);
  half h(1.5f);
  float f = static_cast<float>(h * h);  // 2.25
  EXPECT_EQ(f, 2.25f);
}

TEST(TensorTest, AllocateRefusesWhatCannotExist) {
  absl::StatusOr<Tensor> ok =
      Tensor::Allocate(DType::kInt32, TensorShape({2, 3}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->NumElements(), 6);
  // 2^47 float32 elements are 2^49 bytes: over the limit, not allocated.
  absl::StatusOr<Tensor> big =
      Tensor::Allocate(DType::kFloat32, TensorShape({int64_t{1} << 47}));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("float32[140737488355328]"),
            std::string::npos)
      << big.status();
  EXPECT_EQ(Tensor::Allocate(DType::kFloat32,
                             TensorShape({(int64_t{1} << 62) + 1, 4}))
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(
      Tensor::Allocate(DType::kFloat32, TensorShape({-1, 2})).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::Allocate(DType::kResource, TensorShape({})).status().code(),
            absl::StatusCode::kInvalidArgument);
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
  auto s = Stack(
      {Tensor::FromVector<float>({1, 2}), Tensor::FromVector<float>({3, 4})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->shape(), TensorShape({2, 2}));
  EXPECT_EQ(s->data<float>()[3], 4);
  auto bad = Stack(
      {Tensor::FromVector<float>({1}), Tensor::FromVector<float>({1, 2})});
  EXPECT_FALSE(bad.ok());
}

// Issue 22: integer sums (an outfeed's Sum mode, a pipeline's
// accumulate_outfeed) wrap in two's complement instead of overflowing with
// undefined behaviour (UBSan flags the old code).
TEST(TensorTest, IntegerAddIntoWraps) {
  Tensor a = Tensor::FromVector<int32_t>(
      {std::numeric_limits<int32_t>::max(), -5}, {2});
  ASSERT_TRUE(AddInto(&a, Tensor::FromVector<int32_t>({1, 2}, {2})).ok());
  EXPECT_EQ(a.data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(a.data<int32_t>()[1], -3);
  Tensor b =
      Tensor::FromVector<int64_t>({std::numeric_limits<int64_t>::min()}, {1});
  ASSERT_TRUE(AddInto(&b, Tensor::FromVector<int64_t>({-1}, {1})).ok());
  EXPECT_EQ(b.data<int64_t>()[0], std::numeric_limits<int64_t>::max());
}

// Issue 22: Filled of a dtype without values was IPU_CHECK(false); integer
// fills saturate like Cast.
TEST(TensorTest, FilledRefusesResourceAndSaturatesIntegers) {
  EXPECT_FALSE(Tensor::Filled(DType::kResource, {}, 1.0).valid());
  EXPECT_FALSE(Tensor::Filled(DType::kInvalid, {2}, 1.0).valid());
  EXPECT_EQ(Tensor::Filled(DType::kInt32, {}, 1e20).scalar<int32_t>(),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Tensor::Filled(DType::kInt64, {}, -1e20).scalar<int64_t>(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Tensor::Filled(DType::kInt32, {}, std::nan("")).scalar<int32_t>(),
            0);
  EXPECT_EQ(Tensor::Filled(DType::kInt32, {}, -7.9).scalar<int32_t>(), -7);
}

TEST(DTypeTest, SaturatingToInteger) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(SaturatingToInteger<int32_t>(kInf), INT32_MAX);
  EXPECT_EQ(SaturatingToInteger<int32_t>(-kInf), INT32_MIN);
  EXPECT_EQ(SaturatingToInteger<int32_t>(2147483648.0f), INT32_MAX);
  EXPECT_EQ(SaturatingToInteger<int32_t>(-2147483648.0f), INT32_MIN);
  EXPECT_EQ(SaturatingToInteger<int32_t>(2147483520.0f), 2147483520);
  EXPECT_EQ(SaturatingToInteger<int64_t>(9.3e18f), INT64_MAX);
  EXPECT_EQ(SaturatingToInteger<int64_t>(-3e9f), -3000000000LL);
  EXPECT_EQ(SaturatingToInteger<int64_t>(std::nanf("")), 0);
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
