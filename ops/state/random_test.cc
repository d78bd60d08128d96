#include "ops/state/random.h"

#include <cmath>

#include "core/session.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::TensorNear;

std::string RandomMessage(const absl::Status& s) {
  return std::string(s.message());
}

struct Moments {
  double mean = 0, stddev = 0, min = 1e30, max = -1e30;
};

Moments MomentsOf(const Tensor& t) {
  Moments m;
  const int64_t n = t.NumElements();
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = t.ElementAsDouble(i);
    sum += x;
    sum2 += x * x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean = sum / n;
  m.stddev = std::sqrt(sum2 / n - m.mean * m.mean);
  return m;
}

// Runs `build`'s output `runs` times in one session.
std::vector<Tensor> RunTimes(Output (*build)(const Scope&), int runs) {
  Scope s = Scope::NewRootScope();
  Output y = build(s);
  Session session(s.graph());
  std::vector<Tensor> results;
  for (int i = 0; i < runs; ++i) {
    std::vector<Tensor> out;
    EXPECT_TRUE(session.Run({}, {y}, &out).ok());
    results.push_back(out[0]);
  }
  return results;
}

Output Uniform8(const Scope& s) { return RandomUniform(s, {8}, -1, 1, 42); }

TEST(RandomTest, SameSeedSameSequenceNewNumbersEachRun) {
  std::vector<Tensor> a = RunTimes(Uniform8, 3);
  std::vector<Tensor> b = RunTimes(Uniform8, 3);  // Another graph, session.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(TensorNear(a[i], b[i], 0, 0));
  EXPECT_FALSE(TensorNear(a[0], a[1], 1e-3, 0));
  EXPECT_FALSE(TensorNear(a[1], a[2], 1e-3, 0));
}

TEST(RandomTest, SeedsAndNodeNamesGiveDistinctStreams) {
  Scope s = Scope::NewRootScope();
  Output a = RandomUniform(s, {8}, 0, 1, 1);
  Output b = RandomUniform(s, {8}, 0, 1, 2);
  Output c = RandomUniform(s.WithOpName("c"), {8});  // Seed from the name.
  Output d = RandomUniform(s.WithOpName("d"), {8});
  absl::StatusOr<std::vector<Tensor>> out =
      testing::RunGraph(s, {}, {a, b, c, d});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(TensorNear((*out)[0], (*out)[1], 1e-3, 0));
  EXPECT_FALSE(TensorNear((*out)[2], (*out)[3], 1e-3, 0));
}

TEST(RandomTest, SameResultWhateverTheThreadCount) {
  Tensor results[2];
  for (int threads : {1, 2}) {
    Scope s = Scope::NewRootScope();
    Output y = RandomNormal(s, {100000}, 0, 1, 7);
    Session session(s.graph(), {threads, 0});
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({}, {y}, &out).ok());
    results[threads - 1] = out[0];
  }
  EXPECT_TRUE(TensorNear(results[0], results[1], 0, 0));
}

TEST(RandomUniformTest, Statistics) {
  Scope s = Scope::NewRootScope();
  Output y = RandomUniform(s, {200000}, 2, 5, 3);
  const Moments m = MomentsOf(testing::RunOne(s, {}, y));
  // Uniform on [2, 5): mean 3.5, stddev 3 / sqrt(12); the mean's standard
  // error is 0.87 / sqrt(2e5) ~ 0.002.
  EXPECT_NEAR(m.mean, 3.5, 0.01);
  EXPECT_NEAR(m.stddev, 3 / std::sqrt(12.0), 0.01);
  EXPECT_GE(m.min, 2.0);
  EXPECT_LT(m.max, 5.0);
  EXPECT_LT(m.min, 2.001);
  EXPECT_GT(m.max, 4.999);
}

TEST(RandomUniformTest, EqualBoundsGiveTheBound) {
  Scope s = Scope::NewRootScope();
  Output y = RandomUniform(s, {4}, 0.25f, 0.25f, 1, DType::kFloat16);
  EXPECT_TRUE(TensorNear(testing::RunOne(s, {}, y), {.25f, .25f, .25f, .25f},
                         {4}, 0, 0));
}

TEST(RandomUniformTest, BadAttributesNameTheNode) {
  Scope s = Scope::NewRootScope();
  RandomUniform(s.WithOpName("u"), {2}, 1, 0);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(RandomMessage(s.status())
                .find("RandomUniform 'u': minval 1 must not "
                      "exceed maxval 0"),
            std::string::npos)
      << s.status();
  Scope s2 = Scope::NewRootScope();
  RandomUniform(s2.WithOpName("u"), {-1, 2});
  EXPECT_NE(RandomMessage(s2.status()).find("[?,2] must be fully defined"),
            std::string::npos)
      << s2.status();
  Scope s3 = Scope::NewRootScope();
  RandomUniform(s3.WithOpName("u"), {2}, 0, 1, 0, DType::kInt32);
  EXPECT_NE(RandomMessage(s3.status()).find("got int32"), std::string::npos)
      << s3.status();
}

TEST(RandomNormalTest, Statistics) {
  Scope s = Scope::NewRootScope();
  Output y = RandomNormal(s, {200000}, -1, 3, 5);
  const Moments m = MomentsOf(testing::RunOne(s, {}, y));
  EXPECT_NEAR(m.mean, -1, 0.03);  // Standard error 3 / sqrt(2e5) ~ 0.007.
  EXPECT_NEAR(m.stddev, 3, 0.03);
  EXPECT_LT(m.min, -1 - 3 * 3);  // Tails are there: P(z < -3) = 0.13%.
  EXPECT_GT(m.max, -1 + 3 * 3);
}

TEST(RandomNormalTest, NegativeStddevIsAnError) {
  Scope s = Scope::NewRootScope();
  RandomNormal(s.WithOpName("n"), {2}, 0, -1);
  EXPECT_NE(RandomMessage(s.status())
                .find("RandomNormal 'n': stddev must be >= 0, "
                      "got -1"),
            std::string::npos)
      << s.status();
}

TEST(TruncatedNormalTest, StatisticsAndBound) {
  Scope s = Scope::NewRootScope();
  Output y = TruncatedNormal(s, {200000}, 1, 0.5f, 9);
  const Moments m = MomentsOf(testing::RunOne(s, {}, y));
  // Every value within 2 stddev of the mean; the standard normal truncated
  // to [-2, 2] has stddev 0.8796.
  EXPECT_GE(m.min, 1 - 2 * 0.5);
  EXPECT_LE(m.max, 1 + 2 * 0.5);
  EXPECT_LT(m.min, 1 - 1.99 * 0.5);
  EXPECT_GT(m.max, 1 + 1.99 * 0.5);
  EXPECT_NEAR(m.mean, 1, 0.01);
  EXPECT_NEAR(m.stddev, 0.5 * 0.8796, 0.005);
}

}  // namespace
}  // namespace ipuflow::ops
