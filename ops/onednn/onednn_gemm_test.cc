#include "ops/onednn/onednn_gemm.h"

#include <random>
#include <vector>

#include "Eigen/Core"
#include "gtest/gtest.h"

namespace ipuflow::ops::onednn {
namespace {

using RowMajorMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix>;

std::vector<float> Uniform(int64_t size, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size);
  for (float& x : v) x = dist(gen);
  return v;
}

// What ops/math/gemm.cc computes today: Eigen's product of the operands.
RowMajorMatrix EigenProduct(const float* a, const float* b, const GemmDims& s) {
  const ConstMatrixMap am(a, s.transpose_a ? s.k : s.m,
                          s.transpose_a ? s.m : s.k);
  const ConstMatrixMap bm(b, s.transpose_b ? s.n : s.k,
                          s.transpose_b ? s.k : s.n);
  RowMajorMatrix opa =
      s.transpose_a ? RowMajorMatrix(am.transpose()) : RowMajorMatrix(am);
  RowMajorMatrix opb =
      s.transpose_b ? RowMajorMatrix(bm.transpose()) : RowMajorMatrix(bm);
  return opa * opb;
}

struct Case {
  int64_t m, k, n;
};

class OnednnGemmTest
    : public ::testing::TestWithParam<std::tuple<Case, bool, bool>> {};

// Batch of 3 products whose operands are picked by index (as BatchMatMul's
// broadcasting does), on pools of 1, 2 and 4 threads.
TEST_P(OnednnGemmTest, MatchesEigen) {
  const auto [c, ta, tb] = GetParam();
  const GemmDims s{c.m, c.k, c.n, ta, tb};
  const std::vector<int64_t> a_index = {0, 1, 1}, b_index = {1, 0, 1};
  const std::vector<float> a = Uniform(2 * c.m * c.k, 1),
                           b = Uniform(2 * c.k * c.n, 2);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    ThreadPool pool("onednn-test", workers);
    std::vector<float> out(3 * c.m * c.n, 99.0f);
    BatchedSgemm(pool, a.data(), b.data(), out.data(), s, a_index, b_index);
    for (int i = 0; i < 3; ++i) {
      const RowMajorMatrix want =
          EigenProduct(a.data() + a_index[i] * c.m * c.k,
                       b.data() + b_index[i] * c.k * c.n, s);
      const ConstMatrixMap got(out.data() + i * c.m * c.n, c.m, c.n);
      const float tol = 1e-5f * (c.k + 1);
      EXPECT_LE((got - want).cwiseAbs().maxCoeff(), tol) << "matrix " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OnednnGemmTest,
    ::testing::Combine(::testing::Values(Case{1, 1, 1}, Case{3, 5, 7},
                                         Case{17, 33, 9}, Case{40, 320, 256},
                                         Case{40, 256, 10}, Case{4, 0, 3},
                                         Case{128, 96, 130}),
                       ::testing::Bool(), ::testing::Bool()));

TEST(OnednnGemmRowsTest, WritesOnlyItsRows) {
  const GemmDims s{6, 4, 5, true, false};
  const std::vector<float> a = Uniform(6 * 4, 3), b = Uniform(4 * 5, 4);
  std::vector<float> out(6 * 5, 42.0f);
  SgemmRows(a.data(), b.data(), out.data(), s, 2, 4);
  const RowMajorMatrix want = EigenProduct(a.data(), b.data(), s);
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t j = 0; j < 5; ++j) {
      if (r >= 2 && r < 4) {
        EXPECT_NEAR(out[r * 5 + j], want(r, j), 1e-5);
      } else {
        EXPECT_EQ(out[r * 5 + j], 42.0f);
      }
    }
  }
}

}  // namespace
}  // namespace ipuflow::ops::onednn
