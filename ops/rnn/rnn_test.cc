// PopnnLSTM and PopnnGRU against a float64 evaluation of Keras's
// equations written out here, gradients against finite differences, the
// two layouts against each other, float16 against float32, and the errors.
#include <cmath>
#include <functional>
#include <vector>

#include "core/gradients.h"
#include "core/ipu/ipu_strategy.h"
#include "core/testing/op_test.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/reshape.h"
#include "ops/array/transpose.h"
#include "ops/control/loops.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/math/reduce_mean.h"
#include "ops/math/square.h"
#include "ops/math/sub.h"
#include "ops/rnn/gru.h"
#include "ops/rnn/lstm.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"
#include "ops/testing/half_check.h"
#include "optimizers/gradient_descent.h"

namespace ipuflow::ops {
namespace {

using ::ipuflow::testing::CompareHalfToFloat;
using ::ipuflow::testing::MaxGradientError;
using ::ipuflow::testing::RandomTensor;
using ::ipuflow::testing::RunGraph;
using ::ipuflow::testing::TensorNear;

double Sig(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = t.data<float>()[i];
  return v;
}

// A float32 placeholder per value, in order (fed with `values` by
// MaxGradientError).
std::vector<Output> PlaceholdersFor(const Scope& s,
                                    const std::vector<Tensor>& values) {
  std::vector<Output> out;
  for (const Tensor& t : values) {
    out.push_back(Placeholder(s, DType::kFloat32, t.shape()));
  }
  return out;
}

// Batch-major [B, T, I] LSTM in float64: returns the sequence, then h, c.
struct Ref {
  std::vector<double> seq, h, c;
};

Ref Lstm64(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& k,
           const Tensor& r, const Tensor& bias) {
  const int64_t b = x.shape().dim(0), t = x.shape().dim(1),
                in = x.shape().dim(2), u = r.shape().dim(0);
  const auto xv = Values(x), kv = Values(k), rv = Values(r), bv = Values(bias);
  Ref out{std::vector<double>(b * t * u), Values(h0), Values(c0)};
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t s = 0; s < t; ++s) {
      std::vector<double> z(4 * u);
      for (int64_t q = 0; q < 4 * u; ++q) {
        double a = bv[q];
        for (int64_t i = 0; i < in; ++i) {
          a += xv[(n * t + s) * in + i] * kv[i * 4 * u + q];
        }
        for (int64_t j = 0; j < u; ++j)
          a += out.h[n * u + j] * rv[j * 4 * u + q];
        z[q] = a;
      }
      for (int64_t j = 0; j < u; ++j) {
        const double i = Sig(z[j]), f = Sig(z[u + j]),
                     g = std::tanh(z[2 * u + j]), o = Sig(z[3 * u + j]);
        double& c = out.c[n * u + j];
        c = f * c + i * g;
        out.h[n * u + j] = o * std::tanh(c);
        out.seq[(n * t + s) * u + j] = out.h[n * u + j];
      }
    }
  }
  return out;
}

Ref Gru64(const Tensor& x, const Tensor& h0, const Tensor& k, const Tensor& r,
          const Tensor& bias, bool reset_after) {
  const int64_t b = x.shape().dim(0), t = x.shape().dim(1),
                in = x.shape().dim(2), u = r.shape().dim(0), w = 3 * u;
  const auto xv = Values(x), kv = Values(k), rv = Values(r), bv = Values(bias);
  Ref out{std::vector<double>(b * t * u), Values(h0), {}};
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t s = 0; s < t; ++s) {
      std::vector<double> xw(w), hr(w);
      for (int64_t q = 0; q < w; ++q) {
        for (int64_t i = 0; i < in; ++i) {
          xw[q] += xv[(n * t + s) * in + i] * kv[i * w + q];
        }
        for (int64_t j = 0; j < u; ++j)
          hr[q] += out.h[n * u + j] * rv[j * w + q];
        xw[q] += bv[q];
        if (reset_after) hr[q] += bv[w + q];
      }
      std::vector<double> z(u), rr(u), nn(u);
      for (int64_t j = 0; j < u; ++j) {
        z[j] = Sig(xw[j] + hr[j]);
        rr[j] = Sig(xw[u + j] + hr[u + j]);
      }
      for (int64_t j = 0; j < u; ++j) {
        double a = xw[2 * u + j];
        if (reset_after) {
          a += rr[j] * hr[2 * u + j];
        } else {
          for (int64_t l = 0; l < u; ++l) {
            a += rr[l] * out.h[n * u + l] * rv[l * w + 2 * u + j];
          }
        }
        nn[j] = std::tanh(a);
      }
      for (int64_t j = 0; j < u; ++j) {
        double& h = out.h[n * u + j];
        h = z[j] * h + (1 - z[j]) * nn[j];
        out.seq[(n * t + s) * u + j] = h;
      }
    }
  }
  return out;
}

::testing::AssertionResult Near(const Tensor& got,
                                const std::vector<double>& want, double tol) {
  if (got.NumElements() != static_cast<int64_t>(want.size())) {
    return ::testing::AssertionFailure()
           << got.NumElements() << " elements, want " << want.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got.data<float>()[i] - want[i]) <= tol)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got.data<float>()[i] << " vs "
             << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// One step, one unit, one input: the equations evaluated by hand.
TEST(LstmTest, OneStepByHand) {
  Scope s = Scope::NewRootScope();
  // x = 1, h0 = 0.5, c0 = -1; kernel (i, f, g, o) = 0.1, 0.2, 0.3, 0.4;
  // recurrent 1, 1, 1, 1; bias 0, 1, 0, 0.
  Output x = Const<float>(s, {1.0f}, {1, 1, 1});
  LstmOptions o;
  o.initial_h = Const<float>(s, {0.5f}, {1, 1});
  o.initial_c = Const<float>(s, {-1.0f}, {1, 1});
  LstmOutputs r =
      PopnnLSTM(s, x, Const<float>(s, {0.1f, 0.2f, 0.3f, 0.4f}, {1, 4}),
                Const<float>(s, {1.0f, 1.0f, 1.0f, 1.0f}, {1, 4}),
                Const<float>(s, {0.0f, 1.0f, 0.0f, 0.0f}, {4}), o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = RunGraph(s, {}, {r.output, r.h, r.c});
  ASSERT_TRUE(out.ok()) << out.status();
  // z = (0.6, 1.7, 0.8, 0.9): i = sig(0.6) = 0.645656, f = sig(1.7) =
  // 0.845535, g = tanh(0.8) = 0.664037, o = sig(0.9) = 0.710950;
  // c = f * -1 + i g = -0.416795; h = o tanh(c) = -0.280276.
  EXPECT_TRUE(TensorNear((*out)[2], {-0.416795f}, {1, 1}, 1e-6, 1e-5));
  EXPECT_TRUE(TensorNear((*out)[1], {-0.280276f}, {1, 1}, 1e-6, 1e-5));
  EXPECT_TRUE(TensorNear((*out)[0], {-0.280276f}, {1, 1, 1}, 1e-6, 1e-5));
}

TEST(GruTest, OneStepByHand) {
  // x = 1, h0 = 0.5; kernel (z, r, n) = 0.1, 0.2, 0.3; recurrent 1, 1, 1.
  for (bool reset_after : {true, false}) {
    Scope s = Scope::NewRootScope();
    GruOptions o;
    o.reset_after = reset_after;
    o.initial_h = Const<float>(s, {0.5f}, {1, 1});
    Output bias =
        reset_after
            ? Const<float>(s, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f}, {2, 3})
            : Const<float>(s, {0.0f, 0.0f, 0.0f}, {3});
    GruOutputs r =
        PopnnGRU(s, Const<float>(s, {1.0f}, {1, 1, 1}),
                 Const<float>(s, {0.1f, 0.2f, 0.3f}, {1, 3}),
                 Const<float>(s, {1.0f, 1.0f, 1.0f}, {1, 3}), bias, o);
    ASSERT_TRUE(s.ok()) << s.status();
    auto out = RunGraph(s, {}, {r.h});
    ASSERT_TRUE(out.ok()) << out.status();
    // z = sig(0.6) = 0.645656, r = sig(0.7) = 0.668188.
    // reset_after: n = tanh(0.3 + r (0.5 + 0.5)) = tanh(0.968188)
    //   = 0.747907; h = z 0.5 + (1 - z) n = 0.587844.
    // before: n = tanh(0.3 + r 0.5) = tanh(0.634094) = 0.560865;
    //   h = 0.521567.
    EXPECT_TRUE(TensorNear((*out)[0], {reset_after ? 0.587844f : 0.521567f},
                           {1, 1}, 1e-6, 1e-5))
        << reset_after;
  }
}

struct LstmCase {
  Tensor x, h0, c0, k, r, b;
};

LstmCase RandomLstm(int64_t b, int64_t t, int64_t in, int64_t u,
                    uint32_t seed) {
  return {RandomTensor({b, t, in}, -1, 1, seed),
          RandomTensor({b, u}, -1, 1, seed + 1),
          RandomTensor({b, u}, -1, 1, seed + 2),
          RandomTensor({in, 4 * u}, -0.8, 0.8, seed + 3),
          RandomTensor({u, 4 * u}, -0.8, 0.8, seed + 4),
          RandomTensor({4 * u}, -0.5, 0.5, seed + 5)};
}

TEST(LstmTest, MatchesFloat64BatchAndTimeMajor) {
  const LstmCase v = RandomLstm(3, 5, 4, 6, 10);
  const Ref want = Lstm64(v.x, v.h0, v.c0, v.k, v.r, v.b);
  for (bool time_major : {false, true}) {
    Scope s = Scope::NewRootScope();
    Output x = Const(s, v.x);
    if (time_major) x = Transpose(s, x, {1, 0, 2});
    LstmOptions o;
    o.time_major = time_major;
    o.initial_h = Const(s, v.h0);
    o.initial_c = Const(s, v.c0);
    LstmOutputs r =
        PopnnLSTM(s, x, Const(s, v.k), Const(s, v.r), Const(s, v.b), o);
    Output seq = time_major ? Transpose(s, r.output, {1, 0, 2}) : r.output;
    auto out = RunGraph(s, {}, {seq, r.h, r.c});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Near((*out)[0], want.seq, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[1], want.h, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[2], want.c, 2e-6)) << time_major;
  }
}

TEST(GruTest, MatchesFloat64BatchAndTimeMajor) {
  const int64_t b = 3, t = 5, in = 4, u = 6;
  for (bool reset_after : {true, false}) {
    const Tensor x = RandomTensor({b, t, in}, -1, 1, 1);
    const Tensor h0 = RandomTensor({b, u}, -1, 1, 2);
    const Tensor k = RandomTensor({in, 3 * u}, -0.8, 0.8, 3);
    const Tensor r = RandomTensor({u, 3 * u}, -0.8, 0.8, 4);
    const Tensor bias = reset_after ? RandomTensor({2, 3 * u}, -0.5, 0.5, 5)
                                    : RandomTensor({3 * u}, -0.5, 0.5, 5);
    const Ref want = Gru64(x, h0, k, r, bias, reset_after);
    for (bool time_major : {false, true}) {
      Scope s = Scope::NewRootScope();
      Output xi = Const(s, x);
      if (time_major) xi = Transpose(s, xi, {1, 0, 2});
      GruOptions o;
      o.time_major = time_major;
      o.reset_after = reset_after;
      o.initial_h = Const(s, h0);
      GruOutputs g =
          PopnnGRU(s, xi, Const(s, k), Const(s, r), Const(s, bias), o);
      Output seq = time_major ? Transpose(s, g.output, {1, 0, 2}) : g.output;
      auto out = RunGraph(s, {}, {seq, g.h});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_TRUE(Near((*out)[0], want.seq, 2e-6)) << reset_after << time_major;
      EXPECT_TRUE(Near((*out)[1], want.h, 2e-6)) << reset_after << time_major;
    }
  }
}

// d(sum(r * y))/d(every input) against finite differences, for y the
// sequence, the final h and the final c (the others then get zeros).
TEST(LstmTest, GradientThroughTimeMatchesFiniteDifferences) {
  const LstmCase v = RandomLstm(2, 4, 3, 5, 20);
  for (bool go_backwards : {false, true}) {
    for (bool time_major : {false, true}) {
      for (int which : {0, 1, 2}) {
        Scope s = Scope::NewRootScope();
        Tensor xv = v.x;
        if (time_major) {
          auto t = RunGraph(s, {}, {Transpose(s, Const(s, v.x), {1, 0, 2})});
          ASSERT_TRUE(t.ok());
          xv = (*t)[0];
        }
        const std::vector<Tensor> values = {xv, v.h0, v.c0, v.k, v.r, v.b};
        const std::vector<Output> in = PlaceholdersFor(s, values);
        LstmOptions o;
        o.time_major = time_major;
        o.go_backwards = go_backwards;
        o.initial_h = in[1];
        o.initial_c = in[2];
        LstmOutputs r = PopnnLSTM(s, in[0], in[3], in[4], in[5], o);
        const Output y = which == 0 ? r.output : which == 1 ? r.h : r.c;
        absl::StatusOr<double> err = MaxGradientError(s, in, values, y);
        ASSERT_TRUE(err.ok()) << err.status();
        EXPECT_LT(*err, 2e-3)
            << "go_backwards " << go_backwards << " time_major " << time_major
            << " output " << which;
      }
    }
  }
}

TEST(GruTest, GradientThroughTimeMatchesFiniteDifferences) {
  const int64_t b = 2, t = 4, in = 3, u = 5;
  for (bool go_backwards : {false, true}) {
    for (bool reset_after : {true, false}) {
      for (bool time_major : {false, true}) {
        for (int which : {0, 1}) {
          Scope s = Scope::NewRootScope();
          const std::vector<Tensor> values = {
              time_major ? RandomTensor({t, b, in}, -1, 1, 1)
                         : RandomTensor({b, t, in}, -1, 1, 1),
              RandomTensor({b, u}, -1, 1, 2),
              RandomTensor({in, 3 * u}, -0.8, 0.8, 3),
              RandomTensor({u, 3 * u}, -0.8, 0.8, 4),
              reset_after ? RandomTensor({2, 3 * u}, -0.5, 0.5, 5)
                          : RandomTensor({3 * u}, -0.5, 0.5, 5)};
          const std::vector<Output> xs = PlaceholdersFor(s, values);
          GruOptions o;
          o.time_major = time_major;
          o.reset_after = reset_after;
          o.go_backwards = go_backwards;
          o.initial_h = xs[1];
          GruOutputs g = PopnnGRU(s, xs[0], xs[2], xs[3], xs[4], o);
          absl::StatusOr<double> err =
              MaxGradientError(s, xs, values, which == 0 ? g.output : g.h);
          ASSERT_TRUE(err.ok()) << err.status();
          EXPECT_LT(*err, 2e-3)
              << "go_backwards " << go_backwards << " reset_after "
              << reset_after << " time_major " << time_major << " output "
              << which;
        }
      }
    }
  }
}

// Keras's go_backwards: the layer equals the forward layer run on the
// time-reversed input, its output sequence in the order of the steps.
Tensor ReverseTime(const Tensor& x) {
  const int64_t b = x.shape().dim(0), t = x.shape().dim(1),
                f = x.shape().dim(2);
  Tensor out(DType::kFloat32, x.shape());
  for (int64_t n = 0; n < b; ++n) {
    for (int64_t s = 0; s < t; ++s) {
      for (int64_t i = 0; i < f; ++i) {
        out.data<float>()[(n * t + s) * f + i] =
            x.data<float>()[(n * t + (t - 1 - s)) * f + i];
      }
    }
  }
  return out;
}

TEST(RnnTest, GoBackwardsIsTheReversedInputForward) {
  const LstmCase v = RandomLstm(3, 5, 4, 6, 50);
  const Ref lstm = Lstm64(ReverseTime(v.x), v.h0, v.c0, v.k, v.r, v.b);
  const Tensor gru_bias = RandomTensor({2, 18}, -0.5, 0.5, 51);
  const Tensor gru_k = RandomTensor({4, 18}, -0.8, 0.8, 52);
  const Tensor gru_r = RandomTensor({6, 18}, -0.8, 0.8, 53);
  const Ref gru = Gru64(ReverseTime(v.x), v.h0, gru_k, gru_r, gru_bias,
                        /*reset_after=*/true);
  for (bool time_major : {false, true}) {
    Scope s = Scope::NewRootScope();
    Output x = Const(s, v.x);
    if (time_major) x = Transpose(s, x, {1, 0, 2});
    LstmOptions lo;
    lo.time_major = time_major;
    lo.go_backwards = true;
    lo.initial_h = Const(s, v.h0);
    lo.initial_c = Const(s, v.c0);
    LstmOutputs l =
        PopnnLSTM(s, x, Const(s, v.k), Const(s, v.r), Const(s, v.b), lo);
    GruOptions go;
    go.time_major = time_major;
    go.go_backwards = true;
    go.initial_h = Const(s, v.h0);
    GruOutputs g = PopnnGRU(s, x, Const(s, gru_k), Const(s, gru_r),
                            Const(s, gru_bias), go);
    const auto batch_major = [&](Output y) {
      return time_major ? Transpose(s, y, {1, 0, 2}) : y;
    };
    auto out = RunGraph(
        s, {}, {batch_major(l.output), l.h, l.c, batch_major(g.output), g.h});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(Near((*out)[0], lstm.seq, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[1], lstm.h, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[2], lstm.c, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[3], gru.seq, 2e-6)) << time_major;
    EXPECT_TRUE(Near((*out)[4], gru.h, 2e-6)) << time_major;
  }
}

// Both outputs used at once: their gradients add.
TEST(LstmTest, GradientOfSequenceAndStateTogether) {
  const LstmCase v = RandomLstm(2, 3, 2, 3, 30);
  Scope s = Scope::NewRootScope();
  const std::vector<Tensor> values = {v.x, v.h0, v.c0, v.k, v.r, v.b};
  const std::vector<Output> in = PlaceholdersFor(s, values);
  LstmOptions o;
  o.initial_h = in[1];
  o.initial_c = in[2];
  LstmOutputs r = PopnnLSTM(s, in[0], in[3], in[4], in[5], o);
  Output y = Add(s, Add(s, r.output, Reshape(s, r.c, {2, 1, 3})),
                 Reshape(s, r.h, {2, 1, 3}));
  absl::StatusOr<double> err = MaxGradientError(s, in, values, y);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-3);
}

TEST(RnnTest, Float16IsFloat32RoundedOnce) {
  const LstmCase v = RandomLstm(2, 6, 3, 4, 40);
  absl::StatusOr<::ipuflow::testing::HalfCheck> c = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        LstmOptions o;
        o.initial_h = x[1];
        o.initial_c = x[2];
        return PopnnLSTM(s, x[0], x[3], x[4], x[5], o).output;
      },
      {v.x, v.h0, v.c0, v.k, v.r, v.b});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat16);
  // Each output rounded once (2^-11 relative) from the same float32 values.
  EXPECT_LT(c->forward_error, 1e-3);
  EXPECT_LT(c->gradient_error, 3e-3);
  absl::StatusOr<::ipuflow::testing::HalfCheck> g = CompareHalfToFloat(
      [](const Scope& s, const std::vector<Output>& x) {
        GruOptions o;
        o.initial_h = x[1];
        return PopnnGRU(s, x[0], x[2], x[3], x[4], o).output;
      },
      {v.x, v.h0, RandomTensor({3, 12}, -1, 1, 1),
       RandomTensor({4, 12}, -1, 1, 2), RandomTensor({2, 12}, -1, 1, 3)});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->dtype, DType::kFloat16);
  EXPECT_LT(g->forward_error, 1e-3);
  EXPECT_LT(g->gradient_error, 3e-3);
}

// The builders' zero initial state, and an empty sequence (the final state
// is the initial one).
TEST(RnnTest, ZeroInitialStateAndEmptySequence) {
  const LstmCase v = RandomLstm(2, 3, 2, 3, 50);
  Scope s = Scope::NewRootScope();
  LstmOutputs r =
      PopnnLSTM(s, Const(s, v.x), Const(s, v.k), Const(s, v.r), Const(s, v.b));
  LstmOptions o;
  o.initial_h = Const(s, v.h0);
  o.initial_c = Const(s, v.c0);
  Output empty = Placeholder(s, DType::kFloat32, {2, 0, 2});
  LstmOutputs e =
      PopnnLSTM(s, empty, Const(s, v.k), Const(s, v.r), Const(s, v.b), o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto out =
      RunGraph(s, {{empty, Tensor(DType::kFloat32, TensorShape({2, 0, 2}))}},
               {r.h, e.output, e.h, e.c});
  ASSERT_TRUE(out.ok()) << out.status();
  Tensor zeros(DType::kFloat32, TensorShape({2, 3}));
  for (int64_t i = 0; i < 6; ++i) zeros.data<float>()[i] = 0;
  const Ref want = Lstm64(v.x, zeros, zeros, v.k, v.r, v.b);
  EXPECT_TRUE(Near((*out)[0], want.h, 2e-6));
  EXPECT_EQ((*out)[1].shape(), TensorShape({2, 0, 3}));
  EXPECT_TRUE(TensorNear((*out)[2], v.h0, 0, 0));
  EXPECT_TRUE(TensorNear((*out)[3], v.c0, 0, 0));
}

// Shapes that do not fit are refused when the node is built, naming the
// argument and its shape.
TEST(RnnTest, BadShapesNameTheArgument) {
  struct Case {
    std::string expected;
    std::function<void(const Scope&)> build;
  };
  auto p = [](const Scope& s, TensorShape shape) {
    return Placeholder(s, DType::kFloat32, shape);
  };
  const std::vector<Case> cases = {
      {"PopnnLSTM 'bad': kernel [5,8] must be [input_size, 4 * units] = "
       "[3,8]",
       [&](const Scope& s) {
         PopnnLSTM(s.WithOpName("bad"), p(s, {2, 4, 3}), p(s, {5, 8}),
                   p(s, {2, 8}), p(s, {8}));
       }},
      {"recurrent_kernel [2,6] must be [units, 4 * units] = [2,8]",
       [&](const Scope& s) {
         PopnnLSTM(s, p(s, {2, 4, 3}), p(s, {3, 6}), p(s, {2, 6}), p(s, {6}));
       }},
      {"bias [6] must be [2,6] ([2, 3 * units]: input and recurrent biases)",
       [&](const Scope& s) {
         PopnnGRU(s, p(s, {2, 4, 3}), p(s, {3, 6}), p(s, {2, 6}), p(s, {6}));
       }},
      {"input [4,3] must have rank 3: [time, batch, input_size]",
       [&](const Scope& s) {
         GruOptions o;
         o.time_major = true;
         o.reset_after = false;
         o.initial_h = p(s, {4, 2});
         PopnnGRU(s, p(s, {4, 3}), p(s, {3, 6}), p(s, {2, 6}), p(s, {6}), o);
       }},
      {"initial state 1 [3,2] must be [batch, units] = [2,2]",
       [&](const Scope& s) {
         LstmOptions o;
         o.initial_h = p(s, {2, 2});
         o.initial_c = p(s, {3, 2});
         PopnnLSTM(s, p(s, {2, 4, 3}), p(s, {3, 8}), p(s, {2, 8}), p(s, {8}),
                   o);
       }},
      {"a zero initial state needs a known batch and units",
       [&](const Scope& s) {
         PopnnLSTM(s, p(s, {kUnknownDim, 4, 3}), p(s, {3, 8}), p(s, {2, 8}),
                   p(s, {8}));
       }},
      {"give both initial_h and initial_c, or neither",
       [&](const Scope& s) {
         LstmOptions o;
         o.initial_h = p(s, {2, 2});
         PopnnLSTM(s, p(s, {2, 4, 3}), p(s, {3, 8}), p(s, {2, 8}), p(s, {8}),
                   o);
       }},
  };
  for (const Case& c : cases) {
    Scope s = Scope::NewRootScope();
    c.build(s);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument)
        << c.expected;
    EXPECT_NE(s.status().message().find(c.expected), std::string::npos)
        << s.status();
  }
  // A float16 weight with a float32 input.
  Scope s = Scope::NewRootScope();
  PopnnLSTM(s, p(s, {2, 4, 3}), Placeholder(s, DType::kFloat16, {3, 8}),
            p(s, {2, 8}), p(s, {8}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

// The gradient ops check what flows into them against the forward's
// dimensions, naming every incoming gradient and the input (GraphDef
// import can wire them without the builders' checks).
TEST(RnnTest, GradientOpsNameMismatchedIncomingGradients) {
  auto c = [](const Scope& s, TensorShape shape) {
    return Const(s, RandomTensor(shape, -1, 1, /*seed=*/3));
  };
  {  // LSTM, batch 2, time 3, input 1, units 2: dc is [3,2], not [2,2].
    Scope s = Scope::NewRootScope();
    Node* n = s.AddNode("PopnnLSTMGrad",
                        {c(s, {2, 3, 2}), c(s, {2, 2}), c(s, {3, 2}),
                         c(s, {2, 3, 1}), c(s, {2, 2}), c(s, {2, 2}),
                         c(s, {1, 8}), c(s, {2, 8}), c(s, {3, 2, 12})});
    ASSERT_NE(n, nullptr) << s.status();
    absl::Status st = RunGraph(s, {}, {Output(n, 0)}).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("doutput [2,3,2], dh [2,2], dc [3,2] and "
                                "cache [3,2,12] do not match input [2,3,1] "
                                "and 2 units"),
              std::string::npos)
        << st;
  }
  {  // GRU, the same sizes: the cache has 4 blocks per step, not 5.
    Scope s = Scope::NewRootScope();
    Node* n =
        s.AddNode("PopnnGRUGrad",
                  {c(s, {2, 3, 2}), c(s, {2, 2}), c(s, {2, 3, 1}), c(s, {2, 2}),
                   c(s, {1, 6}), c(s, {2, 6}), c(s, {2, 6}), c(s, {3, 2, 8})});
    ASSERT_NE(n, nullptr) << s.status();
    absl::Status st = RunGraph(s, {}, {Output(n, 0)}).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("doutput [2,3,2], dh [2,2] and cache [3,2,8] "
                                "do not match input [2,3,1] and 2 units"),
              std::string::npos)
        << st;
  }
}

// The cache output is for the gradient only: differentiating it is an
// error, not a silent zero; second derivatives likewise.
TEST(RnnTest, CacheAndSecondDerivativesAreNotDifferentiable) {
  Scope s = Scope::NewRootScope();
  Output x = Placeholder(s, DType::kFloat32, {2, 3, 2});
  LstmOutputs r = PopnnLSTM(s, x, Placeholder(s, DType::kFloat32, {2, 8}),
                            Placeholder(s, DType::kFloat32, {2, 8}),
                            Placeholder(s, DType::kFloat32, {8}));
  std::vector<Output> g;
  absl::Status st = AddGradients(s, {r.cache}, {x}, {}, &g);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("not differentiable"), std::string::npos) << st;
  std::vector<Output> g1, g2;
  Scope s2 = Scope::NewRootScope();
  Output x2 = Placeholder(s2, DType::kFloat32, {2, 3, 2});
  GruOutputs q = PopnnGRU(s2, x2, Placeholder(s2, DType::kFloat32, {2, 6}),
                          Placeholder(s2, DType::kFloat32, {2, 6}),
                          Placeholder(s2, DType::kFloat32, {2, 6}));
  ASSERT_TRUE(AddGradients(s2, {q.h}, {x2}, {}, &g1).ok());
  st = AddGradients(s2, {g1[0]}, {x2}, {}, &g2);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

// Trained as PopnnLSTM / PopnnGRU are meant to be, in a device loop on an
// IPU (loops::Repeat under IPUStrategy): 60 SGD steps of a recurrent layer
// and a dense head regressing a weighted sum over the sequence take the
// loss down, so the gradient through time drives the weights.
TEST(RnnTrainingTest, LstmAndGruLearnInADeviceLoop) {
  for (bool lstm : {true, false}) {
    Scope s = Scope::NewRootScope();
    const int64_t b = 8, t = 5, in = 2, u = 6;
    const Tensor xv = RandomTensor({b, t, in}, -1, 1, 70);
    Tensor target(DType::kFloat32, TensorShape({b, 1}));
    for (int64_t n = 0; n < b; ++n) {
      float sum = 0;
      for (int64_t k = 0; k < t; ++k) {
        sum += 0.3f * xv.data<float>()[(n * t + k) * in] -
               0.2f * xv.data<float>()[(n * t + k) * in + 1];
      }
      target.data<float>()[n] = sum;
    }
    const int64_t gates = lstm ? 4 : 3;
    VariableHandle k =
        Variable(s.WithOpName("kernel"),
                 Const(s, RandomTensor({in, gates * u}, -0.5, 0.5, 71)));
    VariableHandle r =
        Variable(s.WithOpName("recurrent"),
                 Const(s, RandomTensor({u, gates * u}, -0.5, 0.5, 72)));
    VariableHandle bias =
        Variable(s.WithOpName("bias"),
                 Const(s, lstm ? RandomTensor({gates * u}, -0.1, 0.1, 73)
                               : RandomTensor({2, gates * u}, -0.1, 0.1, 73)));
    VariableHandle head = Variable(
        s.WithOpName("head"), Const(s, RandomTensor({u, 1}, -0.5, 0.5, 74)));
    // Each use reads the variables itself (a read outside the loop would be
    // a loop invariant: the weights before the loop).
    auto loss_of = [&](const Scope& sc) {
      Output x = Const(sc, xv);
      Output kv = ReadVariable(sc, k.handle), rv = ReadVariable(sc, r.handle),
             bv = ReadVariable(sc, bias.handle);
      Output h =
          lstm ? PopnnLSTM(sc, x, kv, rv, bv).h : PopnnGRU(sc, x, kv, rv, bv).h;
      Output pred = MatMul(sc, h, ReadVariable(sc, head.handle));
      return ReduceMean(sc, Square(sc, Sub(sc, pred, Const(sc, target))));
    };
    Output loss = loss_of(s);
    optimizers::GradientDescentOptimizer sgd(0.5f);
    auto loop = loops::Repeat(s.NewSubScope("train"), 60,
                              [&](const Scope& sc, const std::vector<Output>&) {
                                sgd.Minimize(sc, loss_of(sc));
                                return std::vector<Output>{};
                              });
    ASSERT_TRUE(loop.ok()) << loop.status();
    ASSERT_TRUE(s.ok()) << s.status();
    IPUConfig config;
    config.set_auto_select_ipus(1);
    auto system = IPUSystem::Create(config);
    ASSERT_TRUE(system.ok()) << system.status();
    IPUStrategy strategy(system->get());
    ASSERT_TRUE(strategy.Initialize(*s.graph()).ok());
    auto before = strategy.Run(*s.graph(), {loss});
    ASSERT_TRUE(before.ok()) << before.status();
    ASSERT_TRUE(strategy.Run(*s.graph(), {}, {loop->op}).ok());
    auto after = strategy.Run(*s.graph(), {loss});
    ASSERT_TRUE(after.ok()) << after.status();
    const float l0 = (*before)[0].data<float>()[0];
    const float l1 = (*after)[0].data<float>()[0];
    EXPECT_LT(l1, 0.2f * l0)
        << (lstm ? "LSTM" : "GRU") << ": " << l0 << " -> " << l1;
  }
}

}  // namespace
}  // namespace ipuflow::ops
