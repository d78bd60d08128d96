#include "ops/math/batch_mat_mul.h"

#include "core/gradients.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/testing/half_check.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::HalfCheck;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunOne;
using ::ipuflow::testing::TensorNear;

TEST(BatchMatMulTest, TwoProducts) {
  Scope s = Scope::NewRootScope();
  // Batch 0: [1 2; 3 4] x I = itself.  Batch 1: [1 0; 0 1] x [5 6; 7 8].
  Output x = Const<float>(s, {1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
  Output y = Const<float>(s, {1, 0, 0, 1, 5, 6, 7, 8}, {2, 2, 2});
  Output z = BatchMatMul(s, x, y);
  EXPECT_EQ(z.shape(), TensorShape({2, 2, 2}));
  EXPECT_TRUE(
      TensorNear(RunOne(s, {}, z), {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
}

TEST(BatchMatMulTest, Adjoints) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 0, 1, 1, 0}, {2, 2, 2});
  // x^T x per batch: [10 14; 14 20] and [1 0; 0 1].
  EXPECT_TRUE(TensorNear(RunOne(s, {}, BatchMatMul(s, x, x, true, false)),
                         {10, 14, 14, 20, 1, 0, 0, 1}, {2, 2, 2}));
  // x x^T per batch: [5 11; 11 25] and [1 0; 0 1].
  EXPECT_TRUE(TensorNear(RunOne(s, {}, BatchMatMul(s, x, x, false, true)),
                         {5, 11, 11, 25, 1, 0, 0, 1}, {2, 2, 2}));
}

TEST(BatchMatMulTest, BroadcastsBatchDims) {
  Scope s = Scope::NewRootScope();
  Output x = Const<float>(s, {1, 2, 3, 4, 5, 6}, {3, 1, 2});  // 3 rows.
  Output w = Const<float>(s, {1, 1, 0, 2}, {2, 2});           // Shared.
  Output z = BatchMatMul(s, x, w);
  EXPECT_EQ(z.shape(), TensorShape({3, 1, 2}));
  EXPECT_TRUE(TensorNear(RunOne(s, {}, z), {1, 5, 3, 11, 5, 17}, {3, 1, 2}));
  // [2,1] batch against [3] batch -> [2,3].
  Output a = Const(s, RandomTensor({2, 1, 2, 3}, -1, 1, 1));
  Output b = Const(s, RandomTensor({3, 3, 2}, -1, 1, 2));
  Output c = BatchMatMul(s, a, b);
  EXPECT_EQ(c.shape(), TensorShape({2, 3, 2, 2}));
  Tensor got = RunOne(s, {}, c);
  Tensor av = a.node->attr<Tensor>("value"), bv = b.node->attr<Tensor>("value");
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int r = 0; r < 2; ++r) {
        for (int col = 0; col < 2; ++col) {
          float want = 0;
          for (int k = 0; k < 3; ++k) {
            want += av.data<float>()[i * 6 + r * 3 + k] *
                    bv.data<float>()[j * 6 + k * 2 + col];
          }
          EXPECT_NEAR(got.data<float>()[((i * 3 + j) * 2 + r) * 2 + col], want,
                      1e-5);
        }
      }
    }
  }
}

TEST(BatchMatMulTest, InnerDimensionError) {
  Scope s = Scope::NewRootScope();
  BatchMatMul(s.WithOpName("bmm"), Const(s, Tensor(DType::kFloat32, {2, 2, 3})),
              Const(s, Tensor(DType::kFloat32, {2, 4, 5})));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "BatchMatMul 'bmm': inner dimensions differ: [2,2,3] x [2,4,5]");
}

TEST(BatchMatMulTest, RankAndBatchErrors) {
  Scope s = Scope::NewRootScope();
  BatchMatMul(s.WithOpName("r"), Const<float>(s, {1, 2}, {2}),
              Const(s, Tensor(DType::kFloat32, {2, 2, 2})));
  EXPECT_NE(
      s.status().message().find(
          "BatchMatMul 'r': input 'x' must have rank >= 2, got shape [2]"),
      std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  BatchMatMul(s2.WithOpName("b"), Const(s2, Tensor(DType::kFloat32, {2, 2, 3})),
              Const(s2, Tensor(DType::kFloat32, {3, 3, 2})));
  EXPECT_NE(s2.status().message().find(
                "BatchMatMul 'b': batch dimensions of [2,2,3] x [3,3,2] do "
                "not broadcast"),
            std::string::npos)
      << s2.status();
}

TEST(BatchMatMulTest, GradientForAllAdjoints) {
  for (bool ax : {false, true}) {
    for (bool ay : {false, true}) {
      Scope s = Scope::NewRootScope();
      const TensorShape xs = ax ? TensorShape{2, 4, 3} : TensorShape{2, 3, 4};
      const TensorShape ys = ay ? TensorShape{2, 2, 4} : TensorShape{2, 4, 2};
      Output x = Placeholder(s, DType::kFloat32, xs);
      Output y = Placeholder(s, DType::kFloat32, ys);
      auto err = MaxGradientError(
          s, {x, y}, {RandomTensor(xs, -1, 1, 1), RandomTensor(ys, -1, 1, 2)},
          BatchMatMul(s, x, y, ax, ay));
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-3) << "adj_x=" << ax << " adj_y=" << ay;
    }
  }
}

TEST(BatchMatMulTest, GradientWithBroadcastBatch) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 1, 3, 2});
  Output w = Placeholder(s, DType::kFloat32, {2, 4});
  auto err = MaxGradientError(
      s, {x, w},
      {RandomTensor({2, 1, 3, 2}, -1, 1, 1), RandomTensor({2, 4}, -1, 1, 2)},
      BatchMatMul(s, x, w));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);
}

TEST(BatchMatMulTest, Float16KernelAndGradientsMatchFloat32) {
  // Broadcast batch: [3,2,10,40] x [40,6] -> [3,2,10,6], y summed back.
  for (bool adj_y : {false, true}) {
    const TensorShape ys = adj_y ? TensorShape{6, 40} : TensorShape{40, 6};
    absl::StatusOr<HalfCheck> c = CompareHalfToFloat(
        [&](const Scope& s, const std::vector<Output>& x) {
          return BatchMatMul(s, x[0], x[1], false, adj_y);
        },
        {RandomTensor({3, 2, 10, 40}, -1, 1, 1), RandomTensor(ys, -1, 1, 2)});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->dtype, DType::kFloat16);
    EXPECT_LT(c->forward_error, 2e-3);
    EXPECT_LT(c->gradient_error, 2e-3);
  }
}

TEST(BatchMatMulTest, PartialsType) {
  // Each batch entry sums 2048 + 64 x 1/16 (see MatMulTest): 2052 with
  // float partials, 2048 with half partials.
  std::vector<float> column(65, 0.0625f);
  column[0] = 2048;
  std::vector<float> columns = column;
  columns.insert(columns.end(), column.begin(), column.end());
  for (const char* p : {"float", "half"}) {
    Scope s = Scope::NewRootScope();
    Output ones = Const(s, Tensor::Filled(DType::kFloat16, {2, 1, 65}, 1));
    Output col = Const(
        s, testing::ToHalf(Tensor::FromVector<float>(columns, {2, 65, 1})));
    Output z = BatchMatMul(s, ones, col, {.partials_type = p});
    const float want = std::string(p) == "float" ? 2052 : 2048;
    EXPECT_TRUE(TensorNear(testing::ToFloat(RunOne(s, {}, z)), {want, want},
                           {2, 1, 1}, 0, 0))
        << p;
  }
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat16, {2, 3, 4});
  Output z = BatchMatMul(s, x, x, {.adj_y = true, .partials_type = "half"});
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(s, {z}, {x}, {}, &grads).ok());
  int products = 0;
  for (const Node* n : s.graph()->nodes()) {
    if (n->op() != "BatchMatMul") continue;
    ++products;
    EXPECT_EQ(n->attr<std::string>("partials_type"), "half") << n->name();
  }
  EXPECT_EQ(products, 3);
  BatchMatMul(s.WithOpName("bad"), x, x,
              {.adj_y = true, .partials_type = "float32"});
  EXPECT_NE(s.status().message().find(
                "BatchMatMul 'bad': partials_type must be \"half\" or "
                "\"float\", got \"float32\""),
            std::string::npos)
      << s.status();
}

TEST(BatchMatMulTest, MixedDTypesAreAnError) {
  Scope s = Scope::NewRootScope();
  BatchMatMul(s.WithOpName("m"), Placeholder(s, DType::kFloat32, {2, 2, 3}),
              Placeholder(s, DType::kFloat16, {2, 3, 4}));
  EXPECT_NE(s.status().message().find(
                "BatchMatMul 'm': input 'x' is float32 but input 'y' is "
                "float16"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace ipuflow::ops
