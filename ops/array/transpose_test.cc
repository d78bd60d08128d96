#include "ops/array/transpose.h"

#include <algorithm>
#include <numeric>

#include "core/gradients.h"
#include "core/half.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

// y[i] = x[j] where j is i's index permuted back, element by element.
std::vector<float> NaiveTranspose(const Tensor& x,
                                  const std::vector<int64_t>& perm) {
  const int rank = x.rank();
  std::vector<int64_t> out_dims(rank), in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d)
    in_strides[d] = in_strides[d + 1] * x.dim(d + 1);
  for (int d = 0; d < rank; ++d) out_dims[d] = x.dim(perm[d]);
  std::vector<float> out;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t n = 0; n < x.NumElements(); ++n) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += idx[d] * in_strides[perm[d]];
    out.push_back(static_cast<float>(x.ElementAsDouble(off)));
    for (int d = rank - 1; d >= 0 && ++idx[d] == out_dims[d]; --d) idx[d] = 0;
  }
  return out;
}

TensorShape PermutedShape(const Tensor& x, const std::vector<int64_t>& perm) {
  TensorShape s;
  for (int64_t p : perm) s.AddDim(x.dim(p));
  return s;
}

TEST(TransposeTest, Matrix) {
  Scope s = Scope::NewRootScope();
  Output y = Transpose(s, Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}), {1, 0});
  EXPECT_EQ(y.shape(), TensorShape({3, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y), {1, 4, 2, 5, 3, 6}, {3, 2}));
}

TEST(TransposeTest, ThreeDimsByHand) {
  // x[i][j][k] = 100i + 10j + k for x:[2,2,3]; y = x with perm [2,0,1].
  Scope s = Scope::NewRootScope();
  Output x = Const<int32_t>(
      s, {0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}, {2, 2, 3});
  Output y = Transpose(s, x, {2, 0, 1});
  EXPECT_TRUE(TensorNear(RunOne(s, {}, y),
                         {0, 10, 100, 110, 1, 11, 101, 111, 2, 12, 102, 112},
                         {3, 2, 2}));
}

TEST(TransposeTest, KeepsInnermostDimension) {
  Scope s = Scope::NewRootScope();
  Output x = Const<int64_t>(s, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Output y = Transpose(s, x, {1, 0, 2});
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, y), {1, 2, 5, 6, 3, 4, 7, 8}, {2, 2, 2}));
}

TEST(TransposeTest, EveryPermutationOfFourDimsAndEveryDType) {
  std::vector<int64_t> perm = {0, 1, 2, 3};
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt32,
                   DType::kInt64, DType::kBool}) {
    Tensor xv = RandomTensor({2, 3, 1, 5}, -8, 8, 3, dt);
    do {
      Scope s = Scope::NewRootScope();
      Output y = Transpose(s, Const(s, xv), perm);
      EXPECT_TRUE(TensorNear(RunOne(s, {}, y), NaiveTranspose(xv, perm),
                             PermutedShape(xv, perm)))
          << DTypeName(dt) << " perm " << perm[0] << perm[1] << perm[2]
          << perm[3];
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(TransposeTest, LargeTiledMatrixAndBatch) {
  for (const auto& [shape, perm] :
       std::vector<std::pair<TensorShape, std::vector<int64_t>>>{
           {{70, 45}, {1, 0}},
           {{3, 33, 65}, {0, 2, 1}},
           {{4, 40, 1, 37}, {0, 3, 2, 1}},
           {{5, 6, 7, 8}, {3, 1, 2, 0}}}) {
    Scope s = Scope::NewRootScope();
    Tensor xv = RandomTensor(shape, -1, 1, 5);
    Output y = Transpose(s, Const(s, xv), perm);
    EXPECT_TRUE(TensorNear(RunOne(s, {}, y), NaiveTranspose(xv, perm),
                           PermutedShape(xv, perm)))
        << shape.DebugString();
  }
}

TEST(TransposeTest, UnknownDimsPropagate) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {-1, 4, 2});
  Output y = Transpose(s, x, {1, 2, 0});
  EXPECT_EQ(y.shape().DebugString(), "[4,2,?]");
  Tensor xv = RandomTensor({3, 4, 2}, -1, 1, 2);
  EXPECT_TRUE(TensorNear(RunOne(s, {{x, xv}}, y), NaiveTranspose(xv, {1, 2, 0}),
                         {4, 2, 3}));
}

TEST(TransposeTest, InvalidPermNamesPermAndRank) {
  for (const std::vector<int64_t>& perm :
       std::vector<std::vector<int64_t>>{{0, 0}, {0}, {0, 2}, {1, -1}}) {
    Scope s = Scope::NewRootScope();
    Transpose(s.WithOpName("t"), Const<float>(s, {1, 2, 3, 4, 5, 6}, {2, 3}),
              perm);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(s.status().message());
    EXPECT_NE(msg.find("Transpose 't'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("perm [" + std::to_string(perm[0])), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rank 2 (shape [2,3])"), std::string::npos) << msg;
  }
}

TEST(TransposeTest, Gradient) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 4});
  Output y = Transpose(s, x, {2, 0, 1});
  auto err = MaxGradientError(s, {x}, {RandomTensor({2, 3, 4}, -1, 1, 1)}, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(TransposeTest, Float16ValuesAndGradientKeepTheirDType) {
  Scope s = Scope::NewRootScope();
  Output x = Const(s, Tensor::FromVector<half>({half(1), half(2), half(3),
                                                half(4), half(5), half(0.1f)},
                                               {2, 3}));
  Output y = Transpose(s, x, {1, 0});
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  Tensor v = RunOne(s, {}, y);
  ASSERT_EQ(v.dtype(), DType::kFloat16);
  const std::vector<half> want = {half(1), half(4), half(2),
                                  half(5), half(3), half(0.1f)};
  EXPECT_EQ(v.ToVector<half>(), want);
  std::vector<Output> g;
  ASSERT_TRUE(AddGradients(s, {y}, {x}, {}, &g).ok());
  EXPECT_EQ(g[0].dtype(), DType::kFloat16);
}

}  // namespace
}  // namespace ipuflow::ops
