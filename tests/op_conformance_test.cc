// The all-ops conformance harness (issue 21): every registered op, for
// float32 and for float16 where its shape function accepts it, against a
// plain float64 reference evaluation of the same op:
//   - random inputs, and for element-wise ops every edge value (+-0, +-inf,
//     NaN, subnormals, the largest finite, ties) and every pair of them;
//   - element-wise ops give the same bits for a value wherever it sits
//     (the same inputs rotated through a SIMD body and its tail);
//   - gradients (AddGradients, float32) against central finite differences
//     of the float64 reference, of L = sum(r * y) for a random r.
// Tolerances are per op, in ONE table (OpTable() below), in units of the
// dtype's rounding (float32 u = 2^-24, float16 u = 2^-11): |y - ref| <=
// ulps * u * |ref| + atol. Anything wider than 10 float32 units says why.
// Gradient ops are checked against the float64 vector-Jacobian product of
// their forward op's reference (AddGradientEntries).
// A registered op without an entry fails the test; an op that is not
// checked here has an entry saying where it is tested and why not here.
// The harness's size (ops x dtypes x cases) is printed at the end.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/gradients.h"
#include "core/graph_def.h"
#include "core/half.h"
#include "core/op_registry.h"
#include "core/scope.h"
#include "core/session.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"

namespace ipuflow {
namespace {

// A float64 tensor: the reference's values (integers and bools as doubles).
struct T64 {
  TensorShape shape;
  std::vector<double> v;
  int64_t size() const { return static_cast<int64_t>(v.size()); }
};
using Refs = std::vector<T64>;
using RefFn = std::function<Refs(const Refs& in, const AttrMap& attrs)>;

// One input of a case. Float inputs take the case's dtype; others keep
// theirs (int32 indices, bool conditions) with integer values in [lo, hi].
struct InputSpec {
  TensorShape shape;
  double lo = -2, hi = 2;
  DType dtype = DType::kInvalid;  // kInvalid: the case's float dtype.
  // The edge values this input takes (the domain of a gradient op's y).
  double edge_lo = -INFINITY, edge_hi = INFINITY;
};

struct OpEntry {
  std::string op;
  std::string variant;  // Several entries of one op differ here (attrs).
  // Non-empty: not evaluated here, and why (where it is tested instead).
  std::string exempt;
  std::vector<InputSpec> inputs;
  AttrMap attrs;
  RefFn ref;
  bool elementwise = false;  // Edge values and position independence.
  double ulps32 = 4;         // float32 tolerance in units of 2^-24.
  double ulps16 = 1;         // float16 tolerance in units of 2^-11.
  double atol = 0;           // Absolute term (cancellation near 0).
  std::string why_wide;      // Required when ulps32 > 10.
  bool grad = true;          // Check the gradient if the op has one.
  double grad_tol = 2e-3;    // |analytic - fd| / max(1, |fd|).
  // Inputs (by index) whose gradient is not checked (e.g. a comparison's
  // tie-breaking input).
  std::set<int> no_grad_inputs;
  // The reference gives the first `outputs` outputs (-1: all); the others
  // (an RNN's cache for its gradient) are neither compared nor
  // differentiated.
  int outputs = -1;
  // The gradient is checked through the first `grad_outputs` outputs (-1:
  // every compared float output); the others (statistics, attention
  // probabilities) feed the gradient op and are not differentiable.
  int grad_outputs = -1;
  // Inputs computed from the others (a gradient op's statistics or cache),
  // in float64 before the rounding to their dtype.
  std::function<void(Refs&)> derive;
};

// ---- Reference building blocks --------------------------------------------

T64 Like(const T64& a) { return {a.shape, std::vector<double>(a.v.size())}; }

// Strides of `in` broadcast to `out` (0 where it broadcasts).
std::vector<int64_t> Strides(const TensorShape& in, const TensorShape& out) {
  std::vector<int64_t> s(out.rank(), 0);
  int64_t stride = 1;
  for (int d = out.rank() - 1, i = in.rank() - 1; d >= 0 && i >= 0; --d, --i) {
    s[d] = in.dim(i) == 1 ? 0 : stride;
    stride *= in.dim(i);
  }
  return s;
}

TensorShape Broadcast(const TensorShape& a, const TensorShape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    dims[i] = std::max(da, db);
  }
  return TensorShape(dims);
}

// Element i of `t` broadcast to `out`.
double At(const T64& t, const TensorShape& out, int64_t i) {
  const std::vector<int64_t> s = Strides(t.shape, out);
  int64_t off = 0;
  for (int d = out.rank() - 1; d >= 0; --d) {
    off += (i % out.dim(d)) * s[d];
    i /= out.dim(d);
  }
  return t.v[off];
}

RefFn UnaryRef(std::function<double(double)> f) {
  return [f](const Refs& in, const AttrMap&) {
    T64 y = Like(in[0]);
    for (int64_t i = 0; i < y.size(); ++i) y.v[i] = f(in[0].v[i]);
    return Refs{y};
  };
}

RefFn NaryRef(std::function<double(const std::vector<double>&)> f) {
  return [f](const Refs& in, const AttrMap&) {
    TensorShape shape = in[0].shape;
    for (const T64& t : in) shape = Broadcast(shape, t.shape);
    T64 y{shape, std::vector<double>(shape.num_elements())};
    std::vector<double> args(in.size());
    for (int64_t i = 0; i < y.size(); ++i) {
      for (size_t k = 0; k < in.size(); ++k) args[k] = At(in[k], shape, i);
      y.v[i] = f(args);
    }
    return Refs{y};
  };
}

RefFn BinaryRef(std::function<double(double, double)> f) {
  return NaryRef([f](const std::vector<double>& a) { return f(a[0], a[1]); });
}

// Reduction over `axes` (all when empty), keep_dims or not.
T64 Reduce(const T64& x, std::vector<int64_t> axes, bool keep_dims, double init,
           const std::function<double(double, double)>& f) {
  const int rank = x.shape.rank();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> kept_dims, out_dims;
  for (int d = 0; d < rank; ++d) {
    if (!red[d]) out_dims.push_back(x.shape.dim(d));
    if (red[d] && keep_dims) out_dims.push_back(1);
    kept_dims.push_back(red[d] ? 1 : x.shape.dim(d));
  }
  const TensorShape kept(kept_dims);
  T64 y{TensorShape(out_dims), std::vector<double>(kept.num_elements(), init)};
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t rest = i, o = 0, mul = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % x.shape.dim(d);
      rest /= x.shape.dim(d);
      if (!red[d]) o += c * mul;
      mul *= kept_dims[d];
    }
    y.v[o] = f(y.v[o], x.v[i]);
  }
  return y;
}

RefFn ReduceRef(double init, std::function<double(double, double)> f,
                bool mean = false) {
  return [=](const Refs& in, const AttrMap& attrs) {
    const auto axes = std::get<std::vector<int64_t>>(attrs.at("axes").value());
    T64 y = Reduce(in[0], axes, std::get<bool>(attrs.at("keep_dims").value()),
                   init, f);
    if (mean) {
      const double n = static_cast<double>(in[0].size()) / y.size();
      for (double& v : y.v) v /= n;
    }
    return Refs{y};
  };
}

// Reduction over the `axes` / `keep_dims` attributes where each output is
// f(the values reducing into it) (log-sum-exp, variance, norms).
RefFn GroupRef(
    std::function<double(const std::vector<double>&, const AttrMap&)> f) {
  return [f](const Refs& in, const AttrMap& attrs) {
    const auto axes = std::get<std::vector<int64_t>>(attrs.at("axes").value());
    const T64& x = in[0];
    // Output index of each element: reduce its index with "keep the last".
    T64 idx = x;
    for (int64_t i = 0; i < idx.size(); ++i) idx.v[i] = i;
    T64 y = Reduce(x, axes, std::get<bool>(attrs.at("keep_dims").value()), 0,
                   [](double, double b) { return b; });
    std::vector<std::vector<double>> groups(y.v.size());
    const int rank = x.shape.rank();
    std::vector<bool> red(rank, axes.empty());
    for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t rest = i, o = 0, mul = 1;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t c = rest % x.shape.dim(d);
        rest /= x.shape.dim(d);
        if (!red[d]) {
          o += c * mul;
          mul *= x.shape.dim(d);
        }
      }
      groups[o].push_back(x.v[i]);
    }
    for (size_t o = 0; o < groups.size(); ++o) y.v[o] = f(groups[o], attrs);
    return Refs{y};
  };
}

double Variance64(const std::vector<double>& v, const AttrMap& attrs) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const int64_t c = std::get<int64_t>(attrs.at("correction").value());
  return ss / std::max<int64_t>(0, static_cast<int64_t>(v.size()) - c);
}

double Norm64(const std::vector<double>& v, const AttrMap& attrs) {
  const double p = std::get<float>(attrs.at("ord").value());
  double s = 0, m = 0;
  for (double x : v) {
    if (std::isnan(x)) return x;
    m = std::max(m, std::fabs(x));
    s += std::pow(std::fabs(x), p);
  }
  return std::isinf(p) ? m : std::pow(s, 1 / p);
}

double LogSumExp64(const std::vector<double>& v, const AttrMap&) {
  double m = -INFINITY;
  for (double x : v) m = std::isnan(x) || std::isnan(m) ? NAN : std::max(m, x);
  if (std::isnan(m) || std::isinf(m)) return m;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// Row-wise over the last axis: f(row) -> row.
RefFn RowRef(std::function<
             std::vector<double>(const std::vector<std::vector<double>>& rows)>
                 f) {
  return [f](const Refs& in, const AttrMap&) {
    const int64_t cols = in[0].shape.dim(in[0].shape.rank() - 1);
    T64 y = Like(in[0]);
    for (int64_t r = 0; r * cols < y.size(); ++r) {
      std::vector<std::vector<double>> rows;
      for (const T64& t : in) {
        rows.emplace_back(t.v.begin() + r * cols, t.v.begin() + (r + 1) * cols);
      }
      const std::vector<double> out = f(rows);
      std::copy(out.begin(), out.end(), y.v.begin() + r * cols);
    }
    return Refs{y};
  };
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

std::vector<double> SoftmaxRow(const std::vector<double>& x) {
  double m = -INFINITY;
  for (double v : x) m = std::max(m, v);
  std::vector<double> e(x.size());
  for (size_t i = 0; i < x.size(); ++i) e[i] = std::exp(x[i] - m);
  const double s = Sum(e);
  for (double& v : e) v /= s;
  return e;
}

// [.., m, k] x [.., k, n] with optional transposes of the last two dims.
T64 MatMul64(const T64& a, const T64& b, bool ta, bool tb) {
  const int ra = a.shape.rank(), rb = b.shape.rank();
  const int64_t m = ta ? a.shape.dim(ra - 1) : a.shape.dim(ra - 2);
  const int64_t k = ta ? a.shape.dim(ra - 2) : a.shape.dim(ra - 1);
  const int64_t n = tb ? b.shape.dim(rb - 2) : b.shape.dim(rb - 1);
  const int64_t batch = a.size() / (m * k);
  std::vector<int64_t> dims;
  for (int d = 0; d < ra - 2; ++d) dims.push_back(a.shape.dim(d));
  dims.push_back(m);
  dims.push_back(n);
  T64 y{TensorShape(dims), std::vector<double>(batch * m * n)};
  for (int64_t p = 0; p < batch; ++p) {
    const double* pa = a.v.data() + p * m * k;
    const double* pb = b.v.data() + (b.size() == k * n ? 0 : p * k * n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) {
          s += (ta ? pa[q * m + i] : pa[i * k + q]) *
               (tb ? pb[j * k + q] : pb[q * n + j]);
        }
        y.v[(p * m + i) * n + j] = s;
      }
    }
  }
  return y;
}

bool GetBool(const AttrMap& attrs, const std::string& name) {
  return std::get<bool>(attrs.at(name).value());
}

// Keras's LSTM (gates i, f, c, o) or GRU (z, r, n), batch- or time-major:
// inputs (x, h0, [c0,] kernel, recurrent_kernel, bias); outputs the
// sequence, the final h [and c], and with_cache the ops' cache for their
// gradient ([T, B, blocks * u]: LSTM i, f, g, o, c, h; GRU z, r, n, h and
// hr_n + b_h,n (reset_after) or r * h_prev).
Refs Rnn64(const Refs& in, const AttrMap& attrs, bool lstm,
           bool with_cache = false) {
  const bool time_major = GetBool(attrs, "time_major");
  const bool reset_after = !lstm && GetBool(attrs, "reset_after");
  const T64& x = in[0];
  const int base = lstm ? 3 : 2;
  const T64 &k = in[base], &r = in[base + 1], &bias = in[base + 2];
  const int64_t tt = x.shape.dim(time_major ? 0 : 1),
                bb = x.shape.dim(time_major ? 1 : 0), ni = x.shape.dim(2),
                u = r.shape.dim(0), w = r.shape.dim(1);
  const int64_t blocks = lstm ? 6 : 5;
  auto row = [&](int64_t t, int64_t b) {
    return time_major ? t * bb + b : b * tt + t;
  };
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  T64 seq{TensorShape({x.shape.dim(0), x.shape.dim(1), u}),
          std::vector<double>(tt * bb * u)};
  T64 cache{TensorShape({tt, bb, blocks * u}),
            std::vector<double>(tt * bb * blocks * u)};
  T64 h = in[1], c = lstm ? in[2] : T64{};
  for (int64_t t = 0; t < tt; ++t) {
    T64 hn = h;
    for (int64_t b = 0; b < bb; ++b) {
      std::vector<double> xw(w), hr(w);
      for (int64_t q = 0; q < w; ++q) {
        for (int64_t i = 0; i < ni; ++i) {
          xw[q] += x.v[row(t, b) * ni + i] * k.v[i * w + q];
        }
        for (int64_t j = 0; j < u; ++j) {
          hr[q] += h.v[b * u + j] * r.v[j * w + q];
        }
        xw[q] += bias.v[q];
        if (reset_after) hr[q] += bias.v[w + q];
      }
      auto put = [&](int64_t block, int64_t j, double v) {
        cache.v[((t * bb + b) * blocks + block) * u + j] = v;
      };
      for (int64_t j = 0; j < u; ++j) {
        double out;
        if (lstm) {
          const double i = sig(xw[j] + hr[j]), f = sig(xw[u + j] + hr[u + j]);
          const double g = std::tanh(xw[2 * u + j] + hr[2 * u + j]);
          const double o = sig(xw[3 * u + j] + hr[3 * u + j]);
          double& cv = c.v[b * u + j];
          cv = f * cv + i * g;
          out = o * std::tanh(cv);
          for (auto [block, v] : {std::pair<int, double>{0, i},
                                  {1, f},
                                  {2, g},
                                  {3, o},
                                  {4, cv},
                                  {5, out}}) {
            put(block, j, v);
          }
        } else {
          const double z = sig(xw[j] + hr[j]);
          const double rr = sig(xw[u + j] + hr[u + j]);
          double a = xw[2 * u + j];
          if (reset_after) {
            a += rr * hr[2 * u + j];
          } else {
            for (int64_t l = 0; l < u; ++l) {
              a += sig(xw[u + l] + hr[u + l]) * h.v[b * u + l] *
                   r.v[l * w + 2 * u + j];
            }
          }
          const double n = std::tanh(a);
          out = z * h.v[b * u + j] + (1 - z) * n;
          for (auto [block, v] :
               {std::pair<int, double>{0, z},
                {1, rr},
                {2, n},
                {3, out},
                {4, reset_after ? hr[2 * u + j] : rr * h.v[b * u + j]}}) {
            put(block, j, v);
          }
        }
        hn.v[b * u + j] = out;
        seq.v[row(t, b) * u + j] = out;
      }
    }
    h = hn;
  }
  Refs out = lstm ? Refs{seq, h, c} : Refs{seq, h};
  if (with_cache) out.push_back(cache);
  return out;
}

// ---- The table --------------------------------------------------------------

const TensorShape kVec({67});  // Not a multiple of 8 or 16: a SIMD tail.

OpEntry Unary(std::string op, std::function<double(double)> f, double lo,
              double hi, double ulps32 = 4) {
  OpEntry e;
  e.op = std::move(op);
  e.inputs = {{kVec, lo, hi}};
  e.ref = UnaryRef(std::move(f));
  e.elementwise = true;
  e.ulps32 = ulps32;
  return e;
}

OpEntry Binary(std::string op, std::function<double(double, double)> f,
               double lo = -2, double hi = 2, double ulps32 = 1) {
  OpEntry e;
  e.op = std::move(op);
  e.inputs = {{kVec, lo, hi}, {kVec, lo, hi}};
  e.ref = BinaryRef(std::move(f));
  e.elementwise = true;
  e.ulps32 = ulps32;
  return e;
}

OpEntry Exempt(std::string op, std::string why) {
  OpEntry e;
  e.op = std::move(op);
  e.exempt = std::move(why);
  return e;
}

OpEntry Wide(OpEntry e, double ulps32, std::string why) {
  e.ulps32 = ulps32;
  e.why_wide = std::move(why);
  return e;
}

double Sigmoid64(double x) { return 1 / (1 + std::exp(-x)); }

// ---- Float64 references of the window, norm, loss and array ops ----------

// NHWC convolution, filter [KH, KW, C / groups, OC], TensorFlow's VALID /
// SAME (SAME pads the dilated window, the extra row / column at the end).
T64 Conv64(const T64& x, const T64& f, int64_t sh, int64_t sw, int64_t dh,
           int64_t dw, bool same, int64_t groups) {
  const int64_t n = x.shape.dim(0), h = x.shape.dim(1), w = x.shape.dim(2),
                c = x.shape.dim(3);
  const int64_t kh = f.shape.dim(0), kw = f.shape.dim(1), cg = f.shape.dim(2),
                oc = f.shape.dim(3), ocg = oc / groups;
  const int64_t ekh = (kh - 1) * dh + 1, ekw = (kw - 1) * dw + 1;
  int64_t oh, ow, pt = 0, pl = 0;
  if (same) {
    oh = (h + sh - 1) / sh;
    ow = (w + sw - 1) / sw;
    pt = std::max<int64_t>((oh - 1) * sh + ekh - h, 0) / 2;
    pl = std::max<int64_t>((ow - 1) * sw + ekw - w, 0) / 2;
  } else {
    oh = (h - ekh) / sh + 1;
    ow = (w - ekw) / sw + 1;
  }
  T64 y{TensorShape({n, oh, ow, oc}), std::vector<double>(n * oh * ow * oc)};
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t o = 0; o < oc; ++o) {
          const int64_t g = o / ocg;
          double s = 0;
          for (int64_t p = 0; p < kh; ++p) {
            for (int64_t q = 0; q < kw; ++q) {
              const int64_t ih = i * sh - pt + p * dh,
                            iw = j * sw - pl + q * dw;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t ci = 0; ci < cg; ++ci) {
                s += x.v[((b * h + ih) * w + iw) * c + g * cg + ci] *
                     f.v[((p * kw + q) * cg + ci) * oc + o];
              }
            }
          }
          y.v[((b * oh + i) * ow + j) * oc + o] = s;
        }
      }
    }
  }
  return y;
}

// NHWC <-> NCHW.
T64 ToNchw(const T64& x) {
  const int64_t n = x.shape.dim(0), h = x.shape.dim(1), w = x.shape.dim(2),
                c = x.shape.dim(3);
  T64 y{TensorShape({n, c, h, w}), std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t ci = i % c, wi = i / c % w, hi = i / c / w % h,
                  b = i / c / w / h;
    y.v[((b * c + ci) * h + hi) * w + wi] = x.v[i];
  }
  return y;
}

T64 ToNhwc(const T64& x) {
  const int64_t n = x.shape.dim(0), c = x.shape.dim(1), h = x.shape.dim(2),
                w = x.shape.dim(3);
  T64 y{TensorShape({n, h, w, c}), std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t wi = i % w, hi = i / w % h, ci = i / w / h % c,
                  b = i / w / h / c;
    y.v[((b * h + hi) * w + wi) * c + ci] = x.v[i];
  }
  return y;
}

// NHWC pooling: max over the window's valid elements, or their mean
// (TensorFlow: SAME's padding is not counted).
T64 Pool64(const T64& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
           bool same, bool max) {
  const int64_t n = x.shape.dim(0), h = x.shape.dim(1), w = x.shape.dim(2),
                c = x.shape.dim(3);
  int64_t oh, ow, pt = 0, pl = 0;
  if (same) {
    oh = (h + sh - 1) / sh;
    ow = (w + sw - 1) / sw;
    pt = std::max<int64_t>((oh - 1) * sh + kh - h, 0) / 2;
    pl = std::max<int64_t>((ow - 1) * sw + kw - w, 0) / 2;
  } else {
    oh = (h - kh) / sh + 1;
    ow = (w - kw) / sw + 1;
  }
  T64 y{TensorShape({n, oh, ow, c}), std::vector<double>(n * oh * ow * c)};
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        for (int64_t ch = 0; ch < c; ++ch) {
          double s = max ? -INFINITY : 0;
          int64_t count = 0;
          for (int64_t p = 0; p < kh; ++p) {
            for (int64_t q = 0; q < kw; ++q) {
              const int64_t ih = i * sh - pt + p, iw = j * sw - pl + q;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              const double v = x.v[((b * h + ih) * w + iw) * c + ch];
              s = max ? std::max(s, v) : s + v;
              ++count;
            }
          }
          y.v[((b * oh + i) * ow + j) * c + ch] = max ? s : s / count;
        }
      }
    }
  }
  return y;
}

// GroupNorm over x [N, ..., C] (channels last) or [N, C, ...] (axis 1).
Refs GroupNorm64(const Refs& in, const AttrMap& attrs) {
  const T64& x = in[0];
  const int64_t groups = std::get<int64_t>(attrs.at("groups").value());
  const bool last = std::get<int64_t>(attrs.at("channels_axis").value()) != 1;
  const bool strided = GetBool(attrs, "strided_channel_grouping");
  const double eps = std::get<float>(attrs.at("epsilon").value());
  const int64_t n = x.shape.dim(0),
                c = x.shape.dim(last ? x.shape.rank() - 1 : 1);
  const int64_t spatial = x.size() / (n * c);
  auto channel = [&](int64_t i) {  // Channel of element i within a sample.
    return last ? i % c : i / spatial % c;
  };
  auto group = [&](int64_t ch) {
    return strided ? ch % groups : ch / (c / groups);
  };
  T64 y = Like(x);
  T64 mean{TensorShape({n, groups}), std::vector<double>(n * groups)};
  T64 inv = mean;
  std::vector<double> count(n * groups), ss(n * groups);
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t k = i / (c * spatial) * groups + group(channel(i));
    mean.v[k] += x.v[i];
    count[k] += 1;
  }
  for (int64_t k = 0; k < n * groups; ++k) mean.v[k] /= count[k];
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t k = i / (c * spatial) * groups + group(channel(i));
    ss[k] += (x.v[i] - mean.v[k]) * (x.v[i] - mean.v[k]);
  }
  for (int64_t k = 0; k < n * groups; ++k) {
    inv.v[k] = 1 / std::sqrt(ss[k] / count[k] + eps);
  }
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t ch = channel(i);
    const int64_t k = i / (c * spatial) * groups + group(ch);
    y.v[i] = (x.v[i] - mean.v[k]) * inv.v[k] * in[1].v[ch] + in[2].v[ch];
  }
  return {y, mean, inv};
}

// BatchNorm (training) over x [..., C]: y, mean, biased variance, inv_std.
Refs BatchNorm64(const Refs& in, const AttrMap& attrs) {
  const T64& x = in[0];
  const double eps = std::get<float>(attrs.at("epsilon").value());
  const int64_t c = x.shape.dim(x.shape.rank() - 1), rows = x.size() / c;
  T64 mean{TensorShape({c}), std::vector<double>(c)}, var = mean, inv = mean;
  for (int64_t i = 0; i < x.size(); ++i) mean.v[i % c] += x.v[i] / rows;
  for (int64_t i = 0; i < x.size(); ++i) {
    var.v[i % c] += (x.v[i] - mean.v[i % c]) * (x.v[i] - mean.v[i % c]) / rows;
  }
  for (int64_t k = 0; k < c; ++k) inv.v[k] = 1 / std::sqrt(var.v[k] + eps);
  T64 y = Like(x);
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t k = i % c;
    y.v[i] = (x.v[i] - mean.v[k]) * inv.v[k] * in[1].v[k] + in[2].v[k];
  }
  return {y, mean, var, inv};
}

// Log-space CTC negative log-likelihood of one sample (Graves et al. 2006).
double CtcNll64(const T64& lp, int64_t n, int64_t batch, int64_t classes,
                const std::vector<int64_t>& label, int64_t len, int64_t blank) {
  std::vector<int64_t> ext = {blank};
  for (int64_t l : label) {
    ext.push_back(l);
    ext.push_back(blank);
  }
  const int64_t s = ext.size();
  auto logp = [&](int64_t t, int64_t k) {
    return lp.v[(t * batch + n) * classes + ext[k]];
  };
  auto lse = [](double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    const double m = std::max(a, b);
    return m + std::log(std::exp(a - m) + std::exp(b - m));
  };
  std::vector<double> alpha(s, -INFINITY), next(s);
  alpha[0] = logp(0, 0);
  if (s > 1) alpha[1] = logp(0, 1);
  for (int64_t t = 1; t < len; ++t) {
    for (int64_t k = 0; k < s; ++k) {
      double a = alpha[k];
      if (k >= 1) a = lse(a, alpha[k - 1]);
      if (k >= 2 && ext[k] != blank && ext[k] != ext[k - 2]) {
        a = lse(a, alpha[k - 2]);
      }
      next[k] = a == -INFINITY ? a : a + logp(t, k);
    }
    alpha = next;
  }
  return -(s > 1 ? lse(alpha[s - 1], alpha[s - 2]) : alpha[0]);
}

void AddReferenceEntries(std::vector<OpEntry>& t) {
  // -- Loss-scaling statistics, with infinities, NaN and a value beyond
  // float16's range (inf as float16) planted among random values.
  const auto plant = [](Refs& in) {
    const double special[] = {INFINITY, -INFINITY, NAN, 1e5, -2, 0.5};
    for (int i = 0; i < 6; ++i) in[0].v[i * 7] = special[i];
  };
  {
    OpEntry e;
    e.op = "NonFiniteCount";
    e.inputs = {{kVec, -3, 3}};
    e.derive = plant;
    e.ref = [](const Refs& in, const AttrMap&) {
      double n = 0;
      for (double v : in[0].v) n += std::isfinite(v) ? 0 : 1;
      return Refs{T64{TensorShape({}), {n}}};
    };
    e.ulps32 = 0;
    e.ulps16 = 0;
    t.push_back(e);
    e.op = "GradientHistogram";
    e.attrs = {{"edge", 1.0f}};
    e.ref = [](const Refs& in, const AttrMap&) {
      double lower = 0;
      for (double v : in[0].v) lower += std::fabs(v) < 1 ? 1 : 0;
      return Refs{T64{TensorShape({}), {lower}},
                  T64{TensorShape({}), {in[0].size() - lower}}};
    };
    t.push_back(e);
  }
  // -- Within-replica collectives over 3 shards [4], [3], [4] (the short one
  // zero-padded); the node computes the output of shard 1.
  const auto within = [](const Refs& in, const std::string& op, int64_t begin,
                         int64_t count) {
    T64 y{TensorShape({count}), std::vector<double>(count)};
    for (int64_t k = 0; k < count; ++k) {
      const int64_t e = begin + k;
      auto at = [&](int j) { return e < in[j].size() ? in[j].v[e] : 0.0; };
      if (e >= 4) continue;
      double acc = op == "local" ? at(1) : at(0);
      for (int j = 1; j < 3 && op != "local"; ++j) {
        const double v = at(j);
        if (op == "sum") acc += v;
        if (op == "mul") acc *= v;
        if (op == "min") acc = std::min(acc, v);
        if (op == "max") acc = std::max(acc, v);
      }
      y.v[k] = acc;
    }
    return Refs{y};
  };
  for (std::string op : {"sum", "mul", "min", "max", "local"}) {
    for (bool scatter : {false, true}) {
      if (scatter && op != "sum" && op != "local") continue;
      OpEntry e;
      e.op = scatter ? "WithinReplicaReduceScatter" : "WithinReplicaAllReduce";
      e.variant = op;
      e.inputs = {{TensorShape({4})}, {TensorShape({3})}, {TensorShape({4})}};
      e.attrs = {{"op", op}, {"shard", int64_t{1}}};
      e.ref = [within, op, scatter](const Refs& in, const AttrMap&) {
        // Chunks of ceil(4 / 3) = 2: shard 1 has elements [2, 4).
        return scatter ? within(in, op, 2, 2) : within(in, op, 0, 4);
      };
      e.ulps32 = 2;  // Three float32 operations.
      e.atol = 1e-7;
      e.ulps16 = 1;
      e.grad = op == "sum" || op == "local";
      t.push_back(e);
    }
  }
  {
    OpEntry e;
    e.op = "WithinReplicaAllGather";
    e.inputs = {
        {TensorShape({2, 2})}, {TensorShape({1, 2})}, {TensorShape({2, 2})}};
    e.ref = [](const Refs& in, const AttrMap&) {
      T64 y{TensorShape({10}), {}};
      for (const T64& x : in) y.v.insert(y.v.end(), x.v.begin(), x.v.end());
      return Refs{y};
    };
    e.ulps32 = 0;
    e.ulps16 = 0;
    t.push_back(e);
  }
  // -- Convolutions and pools against direct loops in float64.
  for (auto [variant, strides, padding, format] :
       std::vector<std::tuple<std::string, std::vector<int64_t>, std::string,
                              std::string>>{
           {"VALID", {1, 1}, "VALID", "NHWC"},
           {"SAME, stride 2", {2, 2}, "SAME", "NHWC"},
           {"SAME, NCHW", {1, 2}, "SAME", "NCHW"}}) {
    const bool nchw = format == "NCHW";
    OpEntry e;
    e.op = "Conv2D";
    e.variant = variant;
    e.inputs = {{nchw ? TensorShape({2, 3, 5, 6}) : TensorShape({2, 5, 6, 3})},
                {TensorShape({3, 2, 3, 4})}};
    e.attrs = {
        {"strides", strides}, {"padding", padding}, {"data_format", format}};
    e.ref = [s = strides, same = padding == "SAME", nchw](const Refs& in,
                                                          const AttrMap&) {
      const T64 x = nchw ? ToNhwc(in[0]) : in[0];
      const T64 y = Conv64(x, in[1], s[0], s[1], 1, 1, same, 1);
      return Refs{nchw ? ToNchw(y) : y};
    };
    e.ulps32 = 8;  // 18-term sums in float32.
    e.atol = 2e-6;
    e.ulps16 = 1;
    t.push_back(e);
  }
  for (auto [variant, strides, dilations, padding, groups] :
       std::vector<std::tuple<std::string, std::vector<int64_t>,
                              std::vector<int64_t>, std::string, int64_t>>{
           {"groups 2, dilation 2x1, SAME", {1, 1}, {2, 1}, "SAME", 2},
           {"depthwise, stride 2, VALID", {2, 2}, {1, 1}, "VALID", 4}}) {
    OpEntry e;
    e.op = "GroupedConv2D";
    e.variant = variant;
    e.inputs = {{TensorShape({2, 6, 5, 4})},
                {TensorShape({3, 2, 4 / groups, 4})}};
    e.attrs = {{"strides", strides},
               {"dilations", dilations},
               {"padding", padding},
               {"groups", groups}};
    e.ref = [s = strides, d = dilations, same = padding == "SAME", g = groups](
                const Refs& in, const AttrMap&) {
      return Refs{Conv64(in[0], in[1], s[0], s[1], d[0], d[1], same, g)};
    };
    e.ulps32 = 8;
    e.atol = 2e-6;
    e.ulps16 = 1;
    t.push_back(e);
  }
  for (bool max : {true, false}) {
    for (auto [variant, padding] :
         std::vector<std::pair<std::string, std::string>>{{"VALID", "VALID"},
                                                          {"SAME", "SAME"}}) {
      OpEntry e;
      e.op = max ? "MaxPool2D" : "AvgPool2D";
      e.variant = variant;
      e.inputs = {{TensorShape({2, 5, 6, 3})}};
      e.attrs = {{"ksize", std::vector<int64_t>{3, 2}},
                 {"strides", std::vector<int64_t>{2, 2}},
                 {"padding", padding}};
      e.ref = [max, same = padding == "SAME"](const Refs& in, const AttrMap&) {
        return Refs{Pool64(in[0], 3, 2, 2, 2, same, max)};
      };
      e.ulps32 = max ? 0 : 2;
      e.ulps16 = max ? 0 : 1;
      e.atol = max ? 0 : 2e-7;  // A mean of +-2 values cancels.
      t.push_back(e);
    }
  }
  // -- Normalisation: the statistics outputs are compared, the gradient
  // goes through y only (the statistics feed the gradient op).
  for (auto [variant, shape, axis, strided] :
       std::vector<std::tuple<std::string, TensorShape, int64_t, bool>>{
           {"NHWC, strided", TensorShape({2, 3, 2, 6}), -1, true},
           {"NCHW, contiguous", TensorShape({2, 6, 3, 2}), 1, false}}) {
    OpEntry e;
    e.op = "GroupNorm";
    e.variant = variant;
    e.inputs = {{shape}, {TensorShape({6}), 0.5, 2}, {TensorShape({6})}};
    e.attrs = {{"groups", int64_t{3}},
               {"channels_axis", axis},
               {"strided_channel_grouping", strided}};
    e.ref = GroupNorm64;
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 2;
    e.grad_outputs = 1;
    t.push_back(e);
  }
  {
    OpEntry e;
    e.op = "BatchNorm";
    e.inputs = {{TensorShape({4, 3, 5})},
                {TensorShape({5}), 0.5, 2},
                {TensorShape({5})}};
    e.ref = BatchNorm64;
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 2;
    e.grad_outputs = 1;
    t.push_back(e);
    e = OpEntry();
    e.op = "BatchNormInference";
    e.inputs = {{TensorShape({4, 3, 5})},
                {TensorShape({5}), 0.5, 2},
                {TensorShape({5})},
                {TensorShape({5}), -1, 1},
                {TensorShape({5}), 0.2, 2}};
    e.ref = [](const Refs& in, const AttrMap& attrs) {
      const double eps = std::get<float>(attrs.at("epsilon").value());
      T64 y = Like(in[0]);
      for (int64_t i = 0; i < y.size(); ++i) {
        const int64_t k = i % 5;
        y.v[i] = (in[0].v[i] - in[3].v[k]) / std::sqrt(in[4].v[k] + eps) *
                     in[1].v[k] +
                 in[2].v[k];
      }
      return Refs{y};
    };
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 2;
    t.push_back(e);
  }
  // -- Losses over classes.
  for (auto [variant, reduction, ignore] :
       std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"mean, ignore_index 1", "mean", 1},
           {"sum", "sum", -100},
           {"none", "none", -100}}) {
    OpEntry e;
    e.op = "NLLLoss";
    e.variant = variant;
    e.inputs = {{TensorShape({7, 4}), -3, 0},
                {TensorShape({7}), 0, 3, DType::kInt32},
                {TensorShape({4}), 0.5, 2}};
    e.attrs = {{"reduction", reduction}, {"ignore_index", ignore}};
    e.ref = [r = reduction, ignore = ignore](const Refs& in, const AttrMap&) {
      T64 none{TensorShape({7}), std::vector<double>(7)};
      double sum = 0, weights = 0;
      for (int64_t i = 0; i < 7; ++i) {
        const int64_t l = static_cast<int64_t>(in[1].v[i]);
        if (l == ignore) continue;
        none.v[i] = -in[2].v[l] * in[0].v[i * 4 + l];
        sum += none.v[i];
        weights += in[2].v[l];
      }
      if (r == "none") return Refs{none};
      return Refs{T64{TensorShape({}), {r == "sum" ? sum : sum / weights}}};
    };
    e.ulps32 = 4;
    e.atol = 1e-6;
    e.ulps16 = 1;
    e.no_grad_inputs = {2};  // The class weights are not differentiated.
    t.push_back(e);
  }
  {
    OpEntry e;
    e.op = "SmoothedSparseSoftmaxCrossEntropy";
    e.inputs = {{TensorShape({5, 6}), -3, 3},
                {TensorShape({5}), 0, 5, DType::kInt32}};
    e.attrs = {{"label_smoothing", 0.1f}};
    e.ref = [](const Refs& in, const AttrMap&) {
      const double eps = static_cast<float>(0.1f);
      T64 y{TensorShape({5}), std::vector<double>(5)};
      for (int64_t i = 0; i < 5; ++i) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < 6; ++c) m = std::max(m, in[0].v[i * 6 + c]);
        for (int64_t c = 0; c < 6; ++c) s += std::exp(in[0].v[i * 6 + c] - m);
        const double lse = m + std::log(s);
        for (int64_t c = 0; c < 6; ++c) {
          const double q =
              eps / 6 + (c == static_cast<int64_t>(in[1].v[i]) ? 1 - eps : 0);
          y.v[i] += q * (lse - in[0].v[i * 6 + c]);
        }
      }
      return Refs{y};
    };
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 1;
    t.push_back(e);
  }
  for (std::string reduction : {"mean", "none"}) {
    // log_probs [T 6, N 3, C 4] (not normalised: the op does not need it),
    // targets [N, S 2] in [1, C) (blank 0), lengths 5-6 and 1-2.
    OpEntry e;
    e.op = "CTCLoss";
    e.variant = reduction;
    e.inputs = {{TensorShape({6, 3, 4}), -3, 0},
                {TensorShape({3, 2}), 1, 3, DType::kInt32},
                {TensorShape({3}), 5, 6, DType::kInt32},
                {TensorShape({3}), 1, 2, DType::kInt32}};
    e.attrs = {{"reduction", reduction}};
    e.ref = [reduction](const Refs& in, const AttrMap&) {
      T64 none{TensorShape({3}), std::vector<double>(3)};
      double mean = 0;
      for (int64_t n = 0; n < 3; ++n) {
        const int64_t len = static_cast<int64_t>(in[3].v[n]);
        std::vector<int64_t> label;
        for (int64_t k = 0; k < len; ++k) {
          label.push_back(static_cast<int64_t>(in[1].v[n * 2 + k]));
        }
        none.v[n] = CtcNll64(in[0], n, 3, 4, label,
                             static_cast<int64_t>(in[2].v[n]), 0);
        mean += none.v[n] / len / 3;
      }
      if (reduction == "none") return Refs{none};
      return Refs{T64{TensorShape({}), {mean}}};
    };
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 1;
    t.push_back(e);
  }
  // -- Attention: both outputs compared, the gradient through the output.
  for (bool causal : {false, true}) {
    OpEntry e;
    e.op = "ScaledDotProductAttention";
    e.variant = causal ? "causal" : "full";
    e.inputs = {{TensorShape({2, 5, 4})},
                {TensorShape({2, 6, 4})},
                {TensorShape({2, 6, 3})}};
    e.attrs = {{"causal", causal}};
    e.ref = [causal](const Refs& in, const AttrMap&) {
      T64 scores = MatMul64(in[0], in[1], false, true);
      T64 probs = scores;
      for (int64_t r = 0; r < 2 * 5; ++r) {
        const int64_t i = r % 5,
                      keys = causal ? std::min<int64_t>(6, i + 1) : 6;
        std::vector<double> row(keys);
        for (int64_t j = 0; j < keys; ++j) row[j] = scores.v[r * 6 + j] / 2;
        row = SoftmaxRow(row);
        for (int64_t j = 0; j < 6; ++j) {
          probs.v[r * 6 + j] = j < keys ? row[j] : 0;
        }
      }
      return Refs{MatMul64(probs, in[2], false, false), probs};
    };
    e.ulps32 = 8;
    e.atol = 1e-6;
    e.ulps16 = 1;
    e.grad_outputs = 1;
    t.push_back(e);
  }
  // -- Array ops and Cast.
  for (DType to : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    OpEntry e;
    e.op = "Cast";
    e.variant = absl::StrCat("to ", DTypeName(to));
    e.inputs = {{kVec, -3, 3}};
    e.attrs = {{"dtype", to}};
    // Identity for the float types (the comparison rounds the reference
    // to the output's dtype; finite differences see d/dx = 1).
    e.ref = UnaryRef(
        [to](double x) { return to == DType::kInt32 ? std::trunc(x) : x; });
    e.elementwise = to != DType::kInt32;  // NaN to an integer: unspecified.
    e.ulps32 = 0;
    e.ulps16 = 0;
    e.grad = to != DType::kInt32;
    t.push_back(e);
  }
  {
    OpEntry e;
    e.op = "Split";
    e.inputs = {{TensorShape({3, 6, 2})}};
    e.attrs = {{"num_split", int64_t{3}}, {"axis", int64_t{1}}};
    e.ref = [](const Refs& in, const AttrMap&) {
      Refs out(3, T64{TensorShape({3, 2, 2}), std::vector<double>(12)});
      for (int64_t i = 0; i < in[0].size(); ++i) {
        const int64_t a = i / 12, b = i / 2 % 6, c = i % 2;
        out[b / 2].v[(a * 2 + b % 2) * 2 + c] = in[0].v[i];
      }
      return out;
    };
    e.ulps32 = 0;
    e.ulps16 = 0;
    t.push_back(e);
  }
  {
    // x[1:, ::-2, 2] of a [3, 5, 4] x: begin_mask on dim 1, shrink dim 2.
    OpEntry e;
    e.op = "StridedSlice";
    e.inputs = {{TensorShape({3, 5, 4})}};
    e.attrs = {{"begin", std::vector<int64_t>{1, 0, 2}},
               {"end", std::vector<int64_t>{10, 0, 3}},
               {"strides", std::vector<int64_t>{1, -2, 1}},
               {"begin_mask", int64_t{2}},
               {"end_mask", int64_t{2}},
               {"shrink_axis_mask", int64_t{4}}};
    e.ref = [](const Refs& in, const AttrMap&) {
      T64 y{TensorShape({2, 3}), {}};
      for (int64_t a = 1; a < 3; ++a) {
        for (int64_t b = 4; b >= 0; b -= 2) {
          y.v.push_back(in[0].v[(a * 5 + b) * 4 + 2]);
        }
      }
      return Refs{y};
    };
    e.ulps32 = 0;
    e.ulps16 = 0;
    t.push_back(e);
  }
  {
    OpEntry e;
    e.op = "ReshapeLike";
    e.inputs = {{TensorShape({2, 6})}, {TensorShape({3, 4})}};
    e.ref = [](const Refs& in, const AttrMap&) {
      return Refs{T64{TensorShape({3, 4}), in[0].v}};
    };
    e.ulps32 = 0;
    e.ulps16 = 0;
    e.no_grad_inputs = {1};  // Gives the shape only.
    t.push_back(e);
  }
}

// ---- Gradient ops: float64 vector-Jacobian products of the forward ------

// d(sum_k cot_k . f(x)_k) / d x[wrt], central differences of the float64
// forward reference f with a relative step `step`: 1e-6 (error ~1e-9, far
// below float32 rounding), or 1 where f is linear in x[wrt] (exact but for
// float64 rounding, so that differences of this reference are accurate
// too: the gradient op's own gradient is then checked by them).
T64 Vjp(const RefFn& f, const AttrMap& attrs, const Refs& x, int wrt,
        const Refs& cot, double step) {
  auto dot = [&](const Refs& y) {
    double s = 0;
    for (size_t k = 0; k < cot.size(); ++k) {
      for (int64_t i = 0; i < cot[k].size(); ++i) s += cot[k].v[i] * y[k].v[i];
    }
    return s;
  };
  T64 g = Like(x[wrt]);
  Refs p = x;
  for (int64_t i = 0; i < g.size(); ++i) {
    const double v = x[wrt].v[i], h = step * std::max(1.0, std::fabs(v));
    p[wrt].v[i] = v + h;
    const double up = dot(f(p, attrs));
    p[wrt].v[i] = v - h;
    const double down = dot(f(p, attrs));
    p[wrt].v[i] = v;
    g.v[i] = (up - down) / (2 * h);
  }
  return g;
}

// Where a gradient op's input comes from: a cotangent of forward output
// k, forward input k, or forward output k computed from the forward
// inputs (statistics, a cache; `dtype` when fixed, e.g. float32).
struct Src {
  enum Kind { kCot, kFwd, kDerived } kind;
  int index;
  DType dtype = DType::kInvalid;
};
Src Cot(int k) { return {Src::kCot, k}; }
Src Fwd(int k) { return {Src::kFwd, k}; }
Src Derived(int k, DType d = DType::kInvalid) { return {Src::kDerived, k, d}; }

struct GradSpec {
  std::string fwd_op, grad_op;
  std::vector<Src> inputs;
  std::vector<int> wrt;  // The forward inputs of the op's outputs, in order.
  // The forward op is linear in each input of `wrt`: exact differences,
  // and the gradient op's own gradient is checked.
  bool linear = false;
  AttrMap extra_attrs;
  RefFn derive_ref;  // For kDerived (default: the forward's reference).
};

// The gradient op's entry from its forward op's entry (every variant): its
// reference is the forward reference's vector-Jacobian product.
OpEntry GradEntry(const OpEntry& fwd, const GradSpec& spec) {
  OpEntry e;
  e.op = spec.grad_op;
  e.variant = fwd.variant.empty() ? fwd.op : fwd.variant;
  // The forward node's attributes (defaults included) and output shapes.
  Scope s = Scope::NewRootScope();
  std::vector<Output> xs;
  for (const InputSpec& in : fwd.inputs) {
    xs.push_back(ops::Placeholder(
        s, in.dtype == DType::kInvalid ? DType::kFloat32 : in.dtype, in.shape));
  }
  Node* node = s.AddNode(fwd.op, xs, fwd.attrs);
  if (node == nullptr) {
    ADD_FAILURE() << fwd.op << ": " << s.status();
    return Exempt(spec.grad_op, "its forward entry does not build");
  }
  const AttrMap fattrs = node->attrs();
  const OpDef* gdef = *OpRegistry::Global()->Find(spec.grad_op);
  for (const auto& [name, value] : fattrs) {
    if (gdef->FindAttr(name) != nullptr) e.attrs.insert({name, value});
  }
  for (const auto& [name, value] : spec.extra_attrs) e.attrs[name] = value;
  for (const Src& src : spec.inputs) {
    if (src.kind == Src::kFwd) {
      e.inputs.push_back(fwd.inputs[src.index]);
    } else {
      InputSpec in{node->output_shape(src.index), -1, 1};
      if (src.kind == Src::kDerived) in.dtype = src.dtype;
      e.inputs.push_back(in);
    }
  }
  const int n_out = fwd.outputs < 0 ? node->num_outputs() : fwd.outputs;
  std::vector<TensorShape> out_shapes;
  for (int k = 0; k < n_out; ++k) out_shapes.push_back(node->output_shape(k));
  // The forward inputs and cotangents a gradient op's inputs stand for.
  auto unpack = [fwd_in = fwd.inputs, srcs = spec.inputs, out_shapes](
                    const Refs& in, Refs* x, Refs* cot) {
    for (const InputSpec& f : fwd_in) {
      x->push_back({f.shape, std::vector<double>(f.shape.num_elements())});
    }
    for (const TensorShape& o : out_shapes) {
      cot->push_back({o, std::vector<double>(o.num_elements())});
    }
    for (size_t k = 0; k < srcs.size(); ++k) {
      if (srcs[k].kind == Src::kFwd) (*x)[srcs[k].index] = in[k];
      if (srcs[k].kind == Src::kCot) (*cot)[srcs[k].index] = in[k];
    }
  };
  e.ref = [f = fwd.ref, fattrs, unpack, wrt = spec.wrt,
           step = spec.linear ? 1.0 : 1e-6](const Refs& in, const AttrMap&) {
    Refs x, cot;
    unpack(in, &x, &cot);
    Refs out;
    for (int w : wrt) out.push_back(Vjp(f, fattrs, x, w, cot, step));
    return out;
  };
  bool derived = false;
  for (const Src& src : spec.inputs) derived |= src.kind == Src::kDerived;
  if (derived) {
    e.derive = [d = spec.derive_ref ? spec.derive_ref : fwd.ref, fattrs, unpack,
                srcs = spec.inputs](Refs& in) {
      Refs x, cot;
      unpack(in, &x, &cot);
      const Refs y = d(x, fattrs);
      for (size_t k = 0; k < srcs.size(); ++k) {
        if (srcs[k].kind == Src::kDerived) in[k] = y[srcs[k].index];
      }
    };
  }
  e.ulps32 = 8;
  e.ulps16 = 2;
  e.atol = 1e-6;
  // A derived input is a function of the others, which finite differences
  // of one input at a time cannot respect.
  e.grad = spec.linear && !derived;
  return e;
}

void AddGradientEntries(std::vector<OpEntry>& t) {
  const DType f32 = DType::kFloat32;
  const std::vector<GradSpec> specs = {
      {"Conv2D", "Conv2DBackpropInput", {Fwd(0), Fwd(1), Cot(0)}, {0}, true},
      {"Conv2D", "Conv2DBackpropFilter", {Fwd(0), Fwd(1), Cot(0)}, {1}, true},
      {"GroupedConv2D",
       "GroupedConv2DBackpropInput",
       {Fwd(0), Fwd(1), Cot(0)},
       {0},
       true},
      {"GroupedConv2D",
       "GroupedConv2DBackpropFilter",
       {Fwd(0), Fwd(1), Cot(0)},
       {1},
       true},
      {"AvgPool2D", "AvgPoolGrad", {Fwd(0), Cot(0)}, {0}, true},
      {"MaxPool2D", "MaxPoolGrad", {Fwd(0), Derived(0), Cot(0)}, {0}},
      {"Concat", "ConcatGrad", {Cot(0), Fwd(0), Fwd(1)}, {0, 1}, true},
      {"Gather", "GatherGrad", {Cot(0), Fwd(1), Fwd(0)}, {0}, true},
      {"EmbeddingLookup",
       "EmbeddingLookupGrad",
       {Cot(0), Fwd(1), Fwd(0)},
       {0},
       true},
      {"StridedSlice", "StridedSliceGrad", {Cot(0), Fwd(0)}, {0}, true},
      {"ReduceSum",
       "ReduceGradLike",
       {Cot(0), Fwd(0)},
       {0},
       true,
       {{"mean", false}}},
      {"ReduceMean",
       "ReduceGradLike",
       {Cot(0), Fwd(0)},
       {0},
       true,
       {{"mean", true}}},
      {"SparseSoftmaxCrossEntropyWithLogits",
       "SparseSoftmaxCrossEntropyWithLogitsGrad",
       {Derived(1), Cot(0)},
       {0}},
      {"LayerNorm",
       "LayerNormGrad",
       {Cot(0), Fwd(0), Fwd(1), Derived(1, f32), Derived(2, f32)},
       {0, 1, 2}},
      {"GroupNorm",
       "GroupNormGrad",
       {Cot(0), Fwd(0), Fwd(1), Derived(1, f32), Derived(2, f32)},
       {0, 1, 2}},
      {"BatchNorm",
       "BatchNormGrad",
       {Cot(0), Fwd(0), Fwd(1), Derived(1, f32), Derived(3, f32)},
       {0, 1, 2}},
      {"BatchNormInference",
       "BatchNormInferenceGrad",
       {Cot(0), Fwd(0), Fwd(1), Fwd(3), Fwd(4)},
       {0, 1, 2, 3, 4}},
      {"NLLLoss", "NLLLossGrad", {Cot(0), Fwd(0), Fwd(1), Fwd(2)}, {0}},
      {"SmoothedSparseSoftmaxCrossEntropy",
       "SmoothedSparseSoftmaxCrossEntropyGrad",
       {Cot(0), Fwd(0), Fwd(1)},
       {0}},
      {"CTCLoss", "CTCLossGrad", {Fwd(0), Fwd(1), Fwd(2), Fwd(3), Cot(0)}, {0}},
      {"ScaledDotProductAttention",
       "ScaledDotProductAttentionGrad",
       {Cot(0), Fwd(0), Fwd(1), Fwd(2), Derived(1, f32)},
       {0, 1, 2}},
      {"PopnnLSTM",
       "PopnnLSTMGrad",
       {Cot(0), Cot(1), Cot(2), Fwd(0), Fwd(1), Fwd(2), Fwd(3), Fwd(4),
        Derived(3, f32)},
       {0, 1, 2, 3, 4, 5},
       false,
       {},
       [](const Refs& in, const AttrMap& a) {
         return Rnn64(in, a, true, true);
       }},
      {"PopnnGRU",
       "PopnnGRUGrad",
       {Cot(0), Cot(1), Fwd(0), Fwd(1), Fwd(2), Fwd(3), Fwd(4),
        Derived(2, f32)},
       {0, 1, 2, 3, 4},
       false,
       {},
       [](const Refs& in, const AttrMap& a) {
         return Rnn64(in, a, false, true);
       }},
  };
  const std::set<std::string> pointwise = {"MSELoss", "L1Loss", "HuberLoss",
                                           "BCEWithLogitsLoss", "KLDivLoss"};
  std::vector<OpEntry> grads;
  for (const OpEntry& fwd : t) {
    if (!fwd.exempt.empty()) continue;
    for (const GradSpec& spec : specs) {
      if (spec.fwd_op == fwd.op) grads.push_back(GradEntry(fwd, spec));
    }
    if (pointwise.count(fwd.op)) {
      GradSpec spec{
          fwd.op, "PointwiseLossGrad", {Cot(0), Fwd(0), Fwd(1)}, {0, 1},
          false,  {{"loss", fwd.op}}};
      grads.push_back(GradEntry(fwd, spec));
    }
  }
  t.insert(t.end(), grads.begin(), grads.end());
}

const std::vector<OpEntry>& OpTable() {
  static const auto* table = new std::vector<OpEntry>([] {
    std::vector<OpEntry> t;
    // -- Element-wise, unary.
    t.push_back(Unary(
        "Exp", [](double x) { return std::exp(x); }, -5, 5));
    t.push_back(Unary(
        "Log", [](double x) { return std::log(x); }, 0.01, 10));
    t.push_back(Unary(
        "Sqrt", [](double x) { return std::sqrt(x); }, 0.01, 10));
    t.push_back(Unary(
        "Rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.01, 10));
    t.push_back(Unary("Sigmoid", Sigmoid64, -12, 12));
    t.push_back(Unary(
        "Tanh", [](double x) { return std::tanh(x); }, -4, 4));
    t.push_back(Unary(
        "Neg", [](double x) { return -x; }, -2, 2, 0));
    t.push_back(Unary(
        "Square", [](double x) { return x * x; }, -2, 2, 1));
    t.push_back(Unary(
        "Relu",
        [](double x) { return x > 0 || x == 0 || std::isnan(x) ? x : 0.0; }, -2,
        2, 0));
    t.push_back(Unary(
        "Identity", [](double x) { return x; }, -2, 2, 0));
    t.push_back(Unary(
        "ZerosLike", [](double x) { return 0.0; }, -2, 2, 0));
    t.push_back(Unary(
        "OnesLike", [](double x) { return 1.0; }, -2, 2, 0));
    // -- Element-wise, binary.
    t.push_back(Binary("Add", [](double a, double b) { return a + b; }));
    t.push_back(Binary("Sub", [](double a, double b) { return a - b; }));
    t.push_back(Binary("Mul", [](double a, double b) { return a * b; }));
    t.push_back(Binary("Div", [](double a, double b) { return a / b; }));
    t.push_back(Binary(
        "Pow", [](double a, double b) { return std::pow(a, b); }, 0.1, 3, 4));
    OpEntry maximum = Binary("Maximum", [](double a, double b) {
      return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    });
    OpEntry minimum = Binary("Minimum", [](double a, double b) {
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    });
    t.push_back(maximum);
    t.push_back(minimum);
    for (auto [name, f] : std::vector<
             std::pair<std::string, std::function<bool(double, double)>>>{
             {"Equal", [](double a, double b) { return a == b; }},
             {"Greater", [](double a, double b) { return a > b; }},
             {"Less", [](double a, double b) { return a < b; }}}) {
      OpEntry e = Binary(
          name, [f = f](double a, double b) { return f(a, b) ? 1.0 : 0.0; });
      e.ulps32 = 0;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "Select";
      e.inputs = {{kVec, 0, 1, DType::kBool}, {kVec}, {kVec}};
      e.ref = NaryRef(
          [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; });
      e.elementwise = true;
      e.ulps32 = 0;
      t.push_back(e);
    }
    // Gradient ops of element-wise ops: (y, dy).
    t.push_back(Binary("ReluGrad",
                       [](double dy, double y) { return y > 0 ? dy : 0.0; }));
    {
      OpEntry e = Binary("SigmoidGrad",
                         [](double y, double dy) { return dy * y * (1 - y); });
      e.inputs[0].lo = 0.01, e.inputs[0].hi = 0.99;
      e.inputs[0].edge_lo = 0, e.inputs[0].edge_hi = 1;  // A sigmoid's y.
      t.push_back(Wide(e, 4, ""));
    }
    {
      OpEntry e = Binary("TanhGrad",
                         [](double y, double dy) { return dy * (1 - y * y); });
      e.inputs[0].lo = -0.99, e.inputs[0].hi = 0.99;
      e.inputs[0].edge_lo = -1, e.inputs[0].edge_hi = 1;  // A tanh's y.
      t.push_back(Wide(e, 4, ""));
    }
    // -- Reductions.
    for (auto [name, init, f, mean] :
         std::vector<std::tuple<std::string, double,
                                std::function<double(double, double)>, bool>>{
             {"ReduceSum", 0.0, [](double a, double b) { return a + b; },
              false},
             {"ReduceMean", 0.0, [](double a, double b) { return a + b; },
              true},
             {"ReduceMax", -INFINITY,
              [](double a, double b) {
                return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
              },
              false},
             {"ReduceMin", INFINITY,
              [](double a, double b) {
                return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
              },
              false}}) {
      OpEntry e;
      e.op = name;
      e.inputs = {{TensorShape({5, 7, 3})}};
      e.attrs = {{"axes", std::vector<int64_t>{0, 2}}, {"keep_dims", false}};
      e.ref = ReduceRef(init, f, mean);
      const bool exact = name == "ReduceMax" || name == "ReduceMin";
      e.ulps32 = exact ? 0 : 8;
      e.atol = exact ? 0 : 1e-6;  // Sums that cancel.
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "ReduceProd";
      e.inputs = {{TensorShape({5, 7, 3}), 0.5, 1.5}};
      e.attrs = {{"axes", std::vector<int64_t>{0, 2}}, {"keep_dims", true}};
      e.ref = ReduceRef(1.0, [](double a, double b) { return a * b; });
      t.push_back(Wide(e, 16,
                       "a float32 product of 15 values rounds 14 times "
                       "(bound 14 units; float16 rounds once from float32)"));
    }
    for (auto [name, f] :
         std::vector<std::pair<std::string,
                               std::function<double(const std::vector<double>&,
                                                    const AttrMap&)>>>{
             {"ReduceLogSumExp", LogSumExp64},
             {"ReduceVariance", Variance64},
             {"ReduceStd",
              [](const std::vector<double>&v,
                 const AttrMap&a) { return std::sqrt(Variance64(v, a)); }},
             {"Norm", Norm64}}) {
      OpEntry e;
      e.op = name;
      e.inputs = {{TensorShape({5, 7, 3})}};
      e.attrs = {{"axes", std::vector<int64_t>{0, 2}}, {"keep_dims", false}};
      e.ref = GroupRef(f);
      e.ulps32 = 8;
      e.atol = 1e-6;
      if (name == "ReduceVariance" || name == "ReduceStd") {
        e.attrs["correction"] = int64_t{0};
        t.push_back(e);
        e.variant = "correction 1, keep_dims";
        e.attrs = {{"axes", std::vector<int64_t>{1}},
                   {"keep_dims", true},
                   {"correction", int64_t{1}}};
      } else if (name == "Norm") {
        for (float ord : {1.0f, 3.0f, INFINITY}) {
          OpEntry v = e;
          v.variant = absl::StrCat("ord ", ord);
          v.attrs["ord"] = ord;
          t.push_back(v);
        }
        e.attrs["ord"] = 2.0f;
      }
      t.push_back(e);
    }
    for (auto [name, all] : std::vector<std::pair<std::string, bool>>{
             {"ReduceAny", false}, {"ReduceAll", true}}) {
      OpEntry e;
      e.op = name;
      e.inputs = {{TensorShape({6, 3, 2}), 0, 1, DType::kBool}};
      e.attrs = {{"axes", std::vector<int64_t>{1, 2}}, {"keep_dims", false}};
      e.ref = ReduceRef(all ? 1.0 : 0.0, [all = all](double a, double b) {
        return all ? (a != 0 && b != 0 ? 1.0 : 0.0)
                   : (a != 0 || b != 0 ? 1.0 : 0.0);
      });
      e.ulps32 = 0;
      t.push_back(e);
    }
    // -- Row-wise.
    {
      OpEntry e;
      e.op = "Softmax";
      e.inputs = {{TensorShape({3, 19}), -5, 5}};
      e.ref = RowRef([](const auto& r) { return SoftmaxRow(r[0]); });
      e.ulps32 = 8;
      t.push_back(e);
      e.op = "LogSoftmax";
      e.ref = RowRef([](const auto& r) {
        std::vector<double> y = SoftmaxRow(r[0]);
        for (double& v : y) v = std::log(v);
        return y;
      });
      e.atol = 1e-6;
      t.push_back(e);
    }
    // -- Matrix products.
    {
      OpEntry e;
      e.op = "MatMul";
      e.inputs = {{TensorShape({4, 9})}, {TensorShape({9, 5})}};
      e.ref = [](const Refs& in, const AttrMap& a) {
        return Refs{MatMul64(in[0], in[1], GetBool(a, "transpose_a"),
                             GetBool(a, "transpose_b"))};
      };
      e.ulps32 = 8;
      e.atol = 1e-6;
      e.ulps16 = 2;
      t.push_back(e);
      e.op = "BatchMatMul";
      e.inputs = {{TensorShape({2, 4, 9})}, {TensorShape({2, 9, 5})}};
      e.ref = [](const Refs& in, const AttrMap& a) {
        return Refs{
            MatMul64(in[0], in[1], GetBool(a, "adj_x"), GetBool(a, "adj_y"))};
      };
      t.push_back(e);
    }
    // -- Row-wise gradients: (y, dy).
    {
      OpEntry e;
      e.op = "SoftmaxGrad";
      e.inputs = {{TensorShape({3, 19}), 0, 0.2}, {TensorShape({3, 19})}};
      e.ref = RowRef([](const auto& r) {
        double d = 0;
        for (size_t i = 0; i < r[0].size(); ++i) d += r[0][i] * r[1][i];
        std::vector<double> dx(r[0].size());
        for (size_t i = 0; i < dx.size(); ++i) dx[i] = (r[1][i] - d) * r[0][i];
        return dx;
      });
      e.ulps32 = 8;
      e.atol = 1e-6;
      t.push_back(e);
      e.op = "LogSoftmaxGrad";
      e.inputs = {{TensorShape({3, 19}), -4, -1}, {TensorShape({3, 19})}};
      e.ref = RowRef([](const auto& r) {
        const double sdy = Sum(r[1]);
        std::vector<double> dx(r[0].size());
        for (size_t i = 0; i < dx.size(); ++i) {
          dx[i] = r[1][i] - std::exp(r[0][i]) * sdy;
        }
        return dx;
      });
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "AddN";
      e.inputs = {
          {TensorShape({4, 5})}, {TensorShape({4, 5})}, {TensorShape({4, 5})}};
      e.ref = NaryRef([](const std::vector<double>& a) { return Sum(a); });
      e.ulps32 = 2;
      e.atol = 1e-7;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "BiasAdd";
      e.inputs = {{TensorShape({3, 2, 5})}, {TensorShape({5})}};
      e.ref = BinaryRef([](double a, double b) { return a + b; });
      e.ulps32 = 1;
      t.push_back(e);
      e.op = "BiasAddGrad";
      e.inputs = {{TensorShape({3, 2, 5})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        return Refs{Reduce(in[0], {0, 1}, false, 0.0,
                           [](double a, double b) { return a + b; })};
      };
      e.ulps32 = 4;
      e.atol = 1e-6;
      t.push_back(e);
      e.op = "SumToShapeOf";
      e.inputs = {{TensorShape({3, 2, 5})}, {TensorShape({2, 1})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y = Reduce(in[0], {0, 2}, true, 0.0,
                       [](double a, double b) { return a + b; });
        y.shape = TensorShape({2, 1});
        return Refs{y};
      };
      e.no_grad_inputs = {1};
      t.push_back(e);
      e.op = "BroadcastLike";
      e.inputs = {{TensorShape({2, 1})}, {TensorShape({3, 2, 5})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{in[1].shape, std::vector<double>(in[1].size())};
        for (int64_t i = 0; i < y.size(); ++i) y.v[i] = At(in[0], y.shape, i);
        return Refs{y};
      };
      e.ulps32 = 0;
      e.atol = 0;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "Transpose";
      e.inputs = {{TensorShape({2, 3, 4})}};
      e.attrs = {{"perm", std::vector<int64_t>{2, 0, 1}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        const T64& x = in[0];
        T64 y{TensorShape({4, 2, 3}), std::vector<double>(x.size())};
        for (int64_t a = 0; a < 2; ++a) {
          for (int64_t b = 0; b < 3; ++b) {
            for (int64_t c = 0; c < 4; ++c) {
              y.v[(c * 2 + a) * 3 + b] = x.v[(a * 3 + b) * 4 + c];
            }
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      t.push_back(e);
      e.op = "Reshape";
      e.attrs = {{"shape", TensorShape({6, 4})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        return Refs{T64{TensorShape({6, 4}), in[0].v}};
      };
      t.push_back(e);
      e.op = "Slice";
      e.attrs = {{"begin", std::vector<int64_t>{1, 0, 1}},
                 {"size", std::vector<int64_t>{1, 2, 3}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({1, 2, 3}), {}};
        for (int64_t b = 0; b < 2; ++b) {
          for (int64_t c = 1; c < 4; ++c) {
            y.v.push_back(in[0].v[(1 * 3 + b) * 4 + c]);
          }
        }
        return Refs{y};
      };
      t.push_back(e);
      e.op = "Pad";
      e.inputs = {{TensorShape({2, 3})}};
      e.attrs = {{"paddings", std::vector<int64_t>{1, 0, 2, 1}},
                 {"constant_value", 0.5f}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({3, 6}), std::vector<double>(18, 0.5)};
        for (int64_t r = 0; r < 2; ++r) {
          for (int64_t c = 0; c < 3; ++c) {
            y.v[(r + 1) * 6 + c + 2] = in[0].v[r * 3 + c];
          }
        }
        return Refs{y};
      };
      t.push_back(e);
      e.op = "Concat";
      e.inputs = {{TensorShape({2, 3})}, {TensorShape({2, 2})}};
      e.attrs = {{"axis", int64_t{1}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({2, 5}), {}};
        for (int64_t r = 0; r < 2; ++r) {
          for (int64_t c = 0; c < 3; ++c) y.v.push_back(in[0].v[r * 3 + c]);
          for (int64_t c = 0; c < 2; ++c) y.v.push_back(in[1].v[r * 2 + c]);
        }
        return Refs{y};
      };
      t.push_back(e);
      e.op = "Gather";
      e.inputs = {{TensorShape({5, 3})},
                  {TensorShape({4}), 0, 4, DType::kInt32}};
      e.attrs = {{"axis", int64_t{0}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({4, 3}), {}};
        for (double i : in[1].v) {
          for (int64_t c = 0; c < 3; ++c) {
            y.v.push_back(in[0].v[static_cast<int64_t>(i) * 3 + c]);
          }
        }
        return Refs{y};
      };
      t.push_back(e);
    }
    for (bool min : {false, true}) {
      OpEntry e;
      e.op = min ? "ArgMin" : "ArgMax";
      e.inputs = {{TensorShape({4, 6})}};
      e.attrs = {{"axis", int64_t{1}}};
      e.ref = [min](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({4}), std::vector<double>(4)};
        for (int64_t r = 0; r < 4; ++r) {
          int64_t best = 0;
          for (int64_t c = 1; c < 6; ++c) {
            const double v = in[0].v[r * 6 + c], b = in[0].v[r * 6 + best];
            if (min ? v < b : v > b) best = c;
          }
          y.v[r] = best;
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "SparseSoftmaxCrossEntropyWithLogits";
      e.inputs = {{TensorShape({4, 11}), -5, 5},
                  {TensorShape({4}), 0, 10, DType::kInt32}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 loss{TensorShape({4}), std::vector<double>(4)};
        T64 bp{TensorShape({4, 11}), {}};
        for (int64_t r = 0; r < 4; ++r) {
          const std::vector<double> x(in[0].v.begin() + r * 11,
                                      in[0].v.begin() + (r + 1) * 11);
          std::vector<double> p = SoftmaxRow(x);
          const int64_t label = static_cast<int64_t>(in[1].v[r]);
          loss.v[r] = -std::log(p[label]);
          p[label] -= 1;
          bp.v.insert(bp.v.end(), p.begin(), p.end());
        }
        return Refs{loss, bp};
      };
      e.ulps32 = 8;
      e.atol = 1e-6;
      // The backprop output (compared above) has no gradient of its own:
      // the gradient goes through the loss.
      e.grad_outputs = 1;
      t.push_back(e);
    }
    // -- Issue 21's model ops (docs/OPS.md).
    t.push_back(Unary(
        "RecomputationCheckpoint", [](double x) { return x; }, -2, 2, 0));
    {
      OpEntry e;
      e.op = "SerializedMatMul";
      e.inputs = {{TensorShape({4, 9})}, {TensorShape({5, 9})}};
      e.attrs = {{"serialization_factor", int64_t{3}},
                 {"serialization_dimension", "a_rows_b_columns"},
                 {"transpose_b", true}};
      e.ref = [](const Refs& in, const AttrMap& a) {
        return Refs{MatMul64(in[0], in[1], GetBool(a, "transpose_a"),
                             GetBool(a, "transpose_b"))};
      };
      e.ulps32 = 8;
      e.atol = 1e-6;
      e.ulps16 = 2;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "EmbeddingLookup";
      e.inputs = {{TensorShape({6, 3})},
                  {TensorShape({2, 4}), 0, 5, DType::kInt32}};
      e.attrs = {{"serialization_factor", int64_t{2}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({2, 4, 3}), {}};
        for (double i : in[1].v) {
          for (int64_t c = 0; c < 3; ++c) {
            y.v.push_back(in[0].v[static_cast<int64_t>(i) * 3 + c]);
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    {
      // Per token over the last axis, epsilon 1e-3 (Keras).
      OpEntry e;
      e.op = "LayerNorm";
      e.inputs = {{TensorShape({3, 13})},
                  {TensorShape({13}), 0.5, 2},
                  {TensorShape({13})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        const int64_t c = 13;
        T64 y = Like(in[0]);
        T64 mean{TensorShape({3}), std::vector<double>(3)};
        T64 inv{TensorShape({3}), std::vector<double>(3)};
        for (int64_t r = 0; r < 3; ++r) {
          double m = 0, v = 0;
          for (int64_t j = 0; j < c; ++j) m += in[0].v[r * c + j];
          m /= c;
          for (int64_t j = 0; j < c; ++j) {
            v += (in[0].v[r * c + j] - m) * (in[0].v[r * c + j] - m);
          }
          v /= c;
          mean.v[r] = m;
          inv.v[r] = 1 / std::sqrt(v + 1e-3);
          for (int64_t j = 0; j < c; ++j) {
            y.v[r * c + j] =
                (in[0].v[r * c + j] - m) * inv.v[r] * in[1].v[j] + in[2].v[j];
          }
        }
        return Refs{y, mean, inv};
      };
      e.ulps32 = 8;
      e.atol = 1e-6;
      e.ulps16 = 2;
      // The statistics outputs are not differentiable (they feed the
      // gradient op): the gradient goes through y.
      e.grad_outputs = 1;
      t.push_back(e);
    }
    // Pointwise losses, element by element (reduction "none"), in float64
    // as their kernels compute them.
    for (auto [name, f, t_lo, t_hi] : std::vector<
             std::tuple<std::string, std::function<double(double, double)>,
                        double, double>>{
             {"MSELoss", [](double x, double y) { return (x - y) * (x - y); },
              -2, 2},
             {"L1Loss", [](double x, double y) { return std::fabs(x - y); }, -2,
              2},
             {"HuberLoss",
              [](double x, double y) {
                const double d = std::fabs(x - y);
                return d <= 1 ? 0.5 * d * d : d - 0.5;
              },
              -2, 2},
             {"BCEWithLogitsLoss",
              [](double x, double y) {
                return (1 - y) * x + std::fmax(-x, 0.0) +
                       std::log1p(std::exp(-std::fabs(x)));
              },
              0, 1},
             {"KLDivLoss",
              [](double x,
                 double y) { return y > 0 ? y * (std::log(y) - x) : 0.0; },
              0.05, 1}}) {
      OpEntry e;
      e.op = name;
      e.inputs = {{kVec}, {kVec, t_lo, t_hi}};
      e.attrs = {{"reduction", "none"}};
      e.ref = BinaryRef(f);
      e.ulps32 = 2;
      e.atol = 1e-7;
      t.push_back(e);
    }
    // -- Element-wise ops of issue 21 (ops/math, ops/nn).
    t.push_back(Unary(
        "Abs", [](double x) { return std::fabs(x); }, -2, 2, 0));
    t.push_back(Unary(
        "Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, -2,
        2, 0));
    t.push_back(Unary(
        "Sin", [](double x) { return std::sin(x); }, -10, 10));
    t.push_back(Unary(
        "Cos", [](double x) { return std::cos(x); }, -10, 10));
    t.push_back(Unary(
        "Erf", [](double x) { return std::erf(x); }, -3, 3));
    t.push_back(Binary(
        "ErfGrad",
        [](double x, double dy) {
          return dy * (2 / std::sqrt(M_PI) * std::exp(-x * x));
        },
        -3, 3, 2));
    t.push_back(Unary(
        "Log1p", [](double x) { return std::log1p(x); }, -0.9, 5));
    t.push_back(Unary(
        "Expm1", [](double x) { return std::expm1(x); }, -5, 5));
    for (auto [name, f] :
         std::vector<std::pair<std::string, double (*)(double)>>{
             {"Floor", [](double x) { return std::floor(x); }},
             {"Ceil", [](double x) { return std::ceil(x); }},
             {"Round", [](double x) { return std::nearbyint(x); }}}) {
      OpEntry e = Unary(name, f, -4, 4, 0);
      e.grad_tol = 0;  // Zero, and the reference's differences are zero.
      t.push_back(e);
    }
    {
      OpEntry e = Unary(
          "Clamp",
          [](double x) {
            return std::isnan(x) ? x : std::min(std::max(x, -0.5), 1.0);
          },
          -2, 2, 0);
      e.attrs = {{"min", -0.5f}, {"max", 1.0f}};
      t.push_back(e);
      e = Binary("ClampGrad", [](double x, double dy) {
        return x >= -0.5 && x <= 1.0 ? dy : 0.0;
      });
      e.attrs = {{"min", -0.5f}, {"max", 1.0f}};
      e.ulps32 = 0;
      t.push_back(e);
    }
    {
      OpEntry e = Unary(
          "Hardtanh",
          [](double x) {
            return std::isnan(x) ? x : std::min(std::max(x, -1.0), 1.0);
          },
          -2, 2, 0);
      t.push_back(e);
      e = Binary("HardtanhGrad", [](double x, double dy) {
        return x > -1 && x < 1 ? dy : 0.0;
      });
      e.ulps32 = 0;
      t.push_back(e);
    }
    {
      OpEntry e = Unary(
          "HardSigmoid",
          [](double x) {
            return std::isnan(x) ? x
                   : x <= -3     ? 0.0
                   : x >= 3      ? 1.0
                                 : x / 6 + 0.5;
          },
          -5, 5, 2);
      t.push_back(e);
      e = Binary(
          "HardSigmoidGrad",
          [](double x, double dy) { return x > -3 && x < 3 ? dy / 6 : 0.0; },
          -5, 5);
      t.push_back(e);
    }
    {
      OpEntry e = Unary(
          "LeakyRelu", [](double x) { return x > 0 ? x : double{0.2f} * x; },
          -2, 2, 1);
      t.push_back(e);
      e = Binary("LeakyReluGrad", [](double x, double dy) {
        return x > 0 ? dy : double{0.2f} * dy;
      });
      t.push_back(e);
    }
    // Smooth activations; their Grad ops have no second derivative yet.
    const auto silu = [](double x) { return x / (1 + std::exp(-x)); };
    const auto silu_grad = [](double x, double dy) {
      const double s = 1 / (1 + std::exp(-x));
      return dy * s * (1 + x * (1 - s));
    };
    const auto elu = [](double x) { return x > 0 ? x : std::expm1(x); };
    const auto elu_grad = [](double x, double dy) {
      return x > 0 ? dy : dy * std::exp(x);
    };
    const auto softplus = [](double x) {
      return x > 20 ? x : std::log1p(std::exp(x));
    };
    const auto softplus_grad = [](double x, double dy) {
      return x > 20 ? dy : dy / (1 + std::exp(-x));
    };
    const auto gelu = [](double x) {
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    };
    const auto gelu_grad = [](double x, double dy) {
      return dy * (0.5 * std::erfc(-x / std::sqrt(2.0)) +
                   x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
    };
    const double k = std::sqrt(2 / M_PI), c = 0.044715;
    const auto gelu_tanh = [k, c](double x) {
      return 0.5 * x * (1 + std::tanh(k * (x + c * x * x * x)));
    };
    const auto gelu_tanh_grad = [k, c](double x, double dy) {
      const double t = std::tanh(k * (x + c * x * x * x));
      return dy *
             (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x));
    };
    for (auto [name, f, g, lo, hi] : std::vector<
             std::tuple<std::string, std::function<double(double)>,
                        std::function<double(double, double)>, double, double>>{
             {"Silu", silu, silu_grad, -6, 6},
             {"Elu", elu, elu_grad, -4, 2},
             {"Softplus", softplus, softplus_grad, -6, 25},
             {"Gelu", gelu, gelu_grad, -3, 3}}) {
      t.push_back(Unary(name, f, lo, hi, 2));
      OpEntry e = Binary(name + "Grad", g, lo, hi, 2);
      e.grad = false;
      t.push_back(e);
    }
    {
      OpEntry e = Unary("Gelu", gelu_tanh, -3, 3, 2);
      e.variant = "tanh";
      e.attrs = {{"approximate", "tanh"}};
      t.push_back(e);
      e = Binary("GeluGrad", gelu_tanh_grad, -3, 3, 2);
      e.variant = "tanh";
      e.attrs = {{"approximate", "tanh"}};
      e.grad = false;
      t.push_back(e);
    }
    // -- Array ops of issue 21.
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        OpEntry e;
        e.op = "CumSum";
        e.variant = absl::StrCat(exclusive ? "exclusive" : "inclusive",
                                 reverse ? " reverse" : "");
        e.inputs = {{TensorShape({3, 9, 2})}};
        e.attrs = {{"axis", int64_t{1}},
                   {"exclusive", exclusive},
                   {"reverse", reverse}};
        e.ref = [](const Refs& in, const AttrMap& a) {
          const bool ex = GetBool(a, "exclusive"), rev = GetBool(a, "reverse");
          T64 y = Like(in[0]);
          for (int64_t o = 0; o < 3; ++o) {
            for (int64_t i = 0; i < 2; ++i) {
              double acc = 0;
              for (int64_t step = 0; step < 9; ++step) {
                const int64_t k = rev ? 8 - step : step;
                const int64_t at = (o * 9 + k) * 2 + i;
                if (!ex) acc += in[0].v[at];
                y.v[at] = acc;
                if (ex) acc += in[0].v[at];
              }
            }
          }
          return Refs{y};
        };
        e.ulps32 = 1;  // float64 sums rounded once.
        e.atol = 1e-7;
        t.push_back(e);
      }
    }
    {
      OpEntry e;
      e.op = "OneHot";
      e.inputs = {{TensorShape({3, 4}), -1, 5, DType::kInt32}};
      e.attrs = {{"depth", int64_t{5}},
                 {"axis", int64_t{1}},
                 {"on_value", 0.9f},
                 {"off_value", 0.025f}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({3, 5, 4}), std::vector<double>(60, 0.025f)};
        for (int64_t a = 0; a < 3; ++a) {
          for (int64_t b = 0; b < 4; ++b) {
            const double k = in[0].v[a * 4 + b];
            if (k >= 0 && k < 5) {
              y.v[(a * 5 + static_cast<int64_t>(k)) * 4 + b] = 0.9f;
            }
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;  // on / off values rounded once to the output dtype.
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "Stack";
      e.inputs = {
          {TensorShape({2, 3})}, {TensorShape({2, 3})}, {TensorShape({2, 3})}};
      e.attrs = {{"axis", int64_t{1}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({2, 3, 3}), {}};
        for (int64_t a = 0; a < 2; ++a) {
          for (size_t k = 0; k < 3; ++k) {
            for (int64_t c = 0; c < 3; ++c) y.v.push_back(in[k].v[a * 3 + c]);
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    for (auto [name, lower, diagonal] :
         std::vector<std::tuple<std::string, bool, int64_t>>{
             {"Tril", true, 0}, {"Triu", false, 1}}) {
      OpEntry e;
      e.op = name;
      e.inputs = {{TensorShape({2, 4, 5})}};
      e.attrs = {{"diagonal", diagonal}};
      e.ref = [lower = lower, diagonal = diagonal](const Refs& in,
                                                   const AttrMap&) {
        T64 y = in[0];
        for (int64_t m = 0; m < 2; ++m) {
          for (int64_t i = 0; i < 4; ++i) {
            for (int64_t j = 0; j < 5; ++j) {
              const bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
              if (!keep) y.v[(m * 4 + i) * 5 + j] = 0;
            }
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "Tile";
      e.inputs = {{TensorShape({2, 3})}};
      e.attrs = {{"multiples", std::vector<int64_t>{2, 3}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({4, 9}), std::vector<double>(36)};
        for (int64_t r = 0; r < 4; ++r) {
          for (int64_t c = 0; c < 9; ++c) {
            y.v[r * 9 + c] = in[0].v[(r % 2) * 3 + c % 3];
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    {
      // Indices with repeats (the harness's random integers) along axis 1.
      OpEntry e;
      e.op = "TakeAlongAxis";
      e.inputs = {{TensorShape({3, 4})},
                  {TensorShape({3, 6}), 0, 3, DType::kInt32}};
      e.attrs = {{"axis", int64_t{1}}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y{TensorShape({3, 6}), std::vector<double>(18)};
        for (int64_t r = 0; r < 3; ++r) {
          for (int64_t k = 0; k < 6; ++k) {
            y.v[r * 6 + k] =
                in[0].v[r * 4 + static_cast<int64_t>(in[1].v[r * 6 + k])];
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
      e.op = "ScatterAdd";
      e.inputs = {{TensorShape({3, 4})},
                  {TensorShape({3, 6}), 0, 3, DType::kInt32},
                  {TensorShape({3, 6})}};
      e.ref = [](const Refs& in, const AttrMap&) {
        T64 y = in[0];
        for (int64_t r = 0; r < 3; ++r) {
          for (int64_t k = 0; k < 6; ++k) {
            y.v[r * 4 + static_cast<int64_t>(in[1].v[r * 6 + k])] +=
                in[2].v[r * 6 + k];
          }
        }
        return Refs{y};
      };
      e.ulps32 = 2;  // Up to 6 float32 additions; float16 sums in float32.
      e.ulps16 = 1;  // Rounded once.
      e.atol = 1e-6;
      t.push_back(e);
    }
    // Sort / TopK: the reference is a float64 stable sort of each line.
    const auto sort_ref = [](const Refs& in, int64_t k, bool descending) {
      const int64_t rows = 4, n = 7;
      T64 v{TensorShape({rows, k}), {}}, idx{TensorShape({rows, k}), {}};
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int64_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const double x = in[0].v[r * n + a], y = in[0].v[r * n + b];
          return descending ? x > y : x < y;
        });
        for (int64_t j = 0; j < k; ++j) {
          v.v.push_back(in[0].v[r * n + order[j]]);
          idx.v.push_back(order[j]);
        }
      }
      return Refs{v, idx};
    };
    for (bool descending : {false, true}) {
      OpEntry e;
      e.op = "Sort";
      e.variant = descending ? "descending" : "ascending";
      e.inputs = {{TensorShape({4, 7})}};
      e.attrs = {{"axis", int64_t{-1}}, {"descending", descending}};
      e.ref = [sort_ref, descending](const Refs& in, const AttrMap&) {
        return sort_ref(in, 7, descending);
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    {
      OpEntry e;
      e.op = "TopK";
      e.inputs = {{TensorShape({4, 7})}};
      e.attrs = {{"k", int64_t{3}}};
      e.ref = [sort_ref](const Refs& in, const AttrMap&) {
        return sort_ref(in, 3, true);
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
    }
    // Pad's modes; PadGrad sums dy into the elements each dy copies.
    const auto pad_source = [](const std::string& mode, int64_t j,
                               int64_t before, int64_t n) {
      int64_t p = j - before;
      if (mode == "reflect") {
        if (p < 0) p = -p;
        if (p >= n) p = 2 * (n - 1) - p;
      } else if (mode == "symmetric") {
        if (p < 0) p = -p - 1;
        if (p >= n) p = 2 * n - 1 - p;
      } else {
        p = std::min(std::max<int64_t>(p, 0), n - 1);
      }
      return p;
    };
    for (const char* mode : {"reflect", "symmetric", "replicate"}) {
      // x [3, 4] padded {2, 1, 3, 2} -> [6, 9].
      OpEntry e;
      e.op = "Pad";
      e.variant = mode;
      e.inputs = {{TensorShape({3, 4})}};
      e.attrs = {{"paddings", std::vector<int64_t>{2, 1, 3, 2}},
                 {"mode", std::string(mode)}};
      e.ref = [pad_source, m = std::string(mode)](const Refs& in,
                                                  const AttrMap&) {
        T64 y{TensorShape({6, 9}), std::vector<double>(54)};
        for (int64_t r = 0; r < 6; ++r) {
          for (int64_t c = 0; c < 9; ++c) {
            y.v[r * 9 + c] =
                in[0].v[pad_source(m, r, 2, 3) * 4 + pad_source(m, c, 3, 4)];
          }
        }
        return Refs{y};
      };
      e.ulps32 = 0;
      e.ulps16 = 0;
      t.push_back(e);
      e.op = "PadGrad";
      e.inputs = {{TensorShape({6, 9})}, {TensorShape({3, 4})}};
      e.ref = [pad_source, m = std::string(mode)](const Refs& in,
                                                  const AttrMap&) {
        T64 dx{TensorShape({3, 4}), std::vector<double>(12)};
        for (int64_t r = 0; r < 6; ++r) {
          for (int64_t c = 0; c < 9; ++c) {
            dx.v[pad_source(m, r, 2, 3) * 4 + pad_source(m, c, 3, 4)] +=
                in[0].v[r * 9 + c];
          }
        }
        return Refs{dx};
      };
      e.ulps32 = 4;  // Up to 12 float32 additions.
      e.ulps16 = 1;  // float32 sums rounded once.
      e.atol = 1e-6;
      e.no_grad_inputs = {1};  // x gives the shape only.
      t.push_back(e);
    }
    // Recurrent layers: the whole sequence and the final state against
    // Keras's equations in float64, batch- and time-major; the gradient
    // (back-propagation through time) against finite differences through
    // every output but the cache.
    for (bool time_major : {false, true}) {
      const int64_t steps = 3, b = 2, ni = 3, u = 4;
      const TensorShape x = time_major ? TensorShape({steps, b, ni})
                                       : TensorShape({b, steps, ni});
      OpEntry e;
      e.op = "PopnnLSTM";
      e.variant = time_major ? "time_major" : "batch_major";
      e.inputs = {{x},
                  {TensorShape({b, u}), -1, 1},
                  {TensorShape({b, u}), -1, 1},
                  {TensorShape({ni, 4 * u}), -0.8, 0.8},
                  {TensorShape({u, 4 * u}), -0.8, 0.8},
                  {TensorShape({4 * u}), -0.5, 0.5}};
      e.attrs = {{"time_major", time_major}};
      e.ref = [](const Refs& in, const AttrMap& a) {
        return Rnn64(in, a, true);
      };
      e.outputs = 3;
      e.ulps32 = 4;
      e.ulps16 = 1;  // Each output rounded once from float32.
      e.atol = 1e-6;
      t.push_back(e);
      for (bool reset_after : {true, false}) {
        OpEntry g;
        g.op = "PopnnGRU";
        g.variant = absl::StrCat(
            e.variant, reset_after ? ", reset_after" : ", reset_before");
        g.inputs = {
            {x},
            {TensorShape({b, u}), -1, 1},
            {TensorShape({ni, 3 * u}), -0.8, 0.8},
            {TensorShape({u, 3 * u}), -0.8, 0.8},
            {reset_after ? TensorShape({2, 3 * u}) : TensorShape({3 * u}), -0.5,
             0.5}};
        g.attrs = {{"time_major", time_major}, {"reset_after", reset_after}};
        g.ref = [](const Refs& in, const AttrMap& a) {
          return Rnn64(in, a, false);
        };
        g.outputs = 2;
        g.ulps32 = 4;
        g.ulps16 = 1;
        g.atol = 1e-6;
        t.push_back(g);
      }
    }
    AddReferenceEntries(t);
    AddGradientEntries(t);
    // -- Not evaluated here, and why.
    const std::string kState =
        "reads or writes a variable or host state; ops/state/*_test.cc";
    for (const char* op :
         {"ApplyAdam", "ApplyGradientDescent", "ApplyLamb", "ApplyMomentum",
          "ApplyRMSProp", "ApplyAdagrad", "ApplySGD", "Assign", "AssignAdd",
          "AssignAddScaled", "AssignScaledAddScaled", "AssignSub",
          "AssignZeros", "ReadVariable", "Variable", "RandomNormal",
          "RandomUniform", "TruncatedNormal"}) {
      t.push_back(Exempt(op, kState));
    }
    for (const char* op :
         {"AllGather", "CrossReplicaMean", "CrossReplicaSum", "ReduceScatter",
          "ReplicaIndex", "ShardedCrossReplicaMean", "ShardedCrossReplicaSum",
          "GatherVariableShards"}) {
      t.push_back(Exempt(op, "needs replicas; ops/collective/*_test.cc"));
    }
    for (const char* op : {"Repeat", "WhileLoop", "PipelineFrame"}) {
      t.push_back(Exempt(op,
                         "runs sub-programs; ops/control/loops_test.cc, "
                         "pipelining/*_test.cc"));
    }
    for (const char* op : {"InfeedDequeue", "OutfeedEnqueue",
                           "OffloadedStateLoad", "OffloadedStateStore"}) {
      t.push_back(Exempt(op,
                         "moves data to or from the host; "
                         "feeds/*_test.cc, optimizers/*_test.cc"));
    }
    t.push_back(Exempt("Const", "no computation: its value"));
    t.push_back(Exempt("Placeholder", "no computation: its feed"));
    t.push_back(Exempt("NoOp", "no computation"));
    t.push_back(Exempt("_Arg", "a loop body's argument: no computation"));
    t.push_back(Exempt("Print", "a side effect; ops/array/print_test.cc"));
    t.push_back(Exempt("Fill", "no input; ops/array/fill tests"));
    t.push_back(Exempt("Dropout", "random mask; ops/nn/dropout_test.cc"));
    t.push_back(Exempt("DropoutGrad", "random mask; ops/nn/dropout_test.cc"));
    for (const char* op : {"IpuDropout", "IpuDropoutWithSeed"}) {
      t.push_back(Exempt(op, "random mask; ops/nn/ipu_dropout_test.cc"));
    }
    return t;
  }());
  return *table;
}

// ---- The harness -----------------------------------------------------------

bool IsFloat(DType d) { return d == DType::kFloat32 || d == DType::kFloat16; }

// The value `v` as dtype `d` and back (what the kernel sees).
double RoundTo(DType d, double v) {
  switch (d) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat16:
      return static_cast<float>(half(static_cast<float>(v)));
    case DType::kBool:
      return v != 0 ? 1 : 0;
    default:
      return std::nearbyint(v);
  }
}

Tensor ToTensor(DType d, const T64& t) {
  Tensor out(d, t.shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    switch (d) {
      case DType::kFloat32:
        out.data<float>()[i] = static_cast<float>(t.v[i]);
        break;
      case DType::kFloat16:
        out.data<half>()[i] = half(static_cast<float>(t.v[i]));
        break;
      case DType::kInt32:
        out.data<int32_t>()[i] = static_cast<int32_t>(t.v[i]);
        break;
      case DType::kInt64:
        out.data<int64_t>()[i] = static_cast<int64_t>(t.v[i]);
        break;
      case DType::kBool:
        out.data<bool>()[i] = t.v[i] != 0;
        break;
      default:
        ADD_FAILURE() << "no conversion to " << DTypeName(d);
    }
  }
  return out;
}

T64 FromTensor(const Tensor& t) {
  T64 out{t.shape(), std::vector<double>(t.NumElements())};
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        out.v[i] = t.data<float>()[i];
        break;
      case DType::kFloat16:
        out.v[i] = static_cast<float>(t.data<half>()[i]);
        break;
      case DType::kInt32:
        out.v[i] = t.data<int32_t>()[i];
        break;
      case DType::kInt64:
        out.v[i] = static_cast<double>(t.data<int64_t>()[i]);
        break;
      case DType::kBool:
        out.v[i] = t.data<bool>()[i] ? 1 : 0;
        break;
      default:
        ADD_FAILURE() << "no conversion from " << DTypeName(t.dtype());
    }
  }
  return out;
}

// The edge values of issue 21, as float32 (float16 rounds them: FLT_MAX
// becomes inf; its own largest finite and subnormals are added).
std::vector<double> EdgeValues(DType d) {
  const double inf = INFINITY;
  std::vector<double> v = {0.0, -0.0, inf, -inf, NAN, 1.0,  -1.0, 0.5, -0.5,
                           1.5, -1.5, 2.5, -2.5, 3.0, 100., -100, 1e-3};
  if (d == DType::kFloat32) {
    for (double x : {1e-45, 1e-40, 1.1754942e-38, 3.4028235e38}) {
      v.push_back(x);
      v.push_back(-x);
    }
  } else {
    for (double x : {6e-8, 3e-5, 65504.0}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  for (double& x : v) x = RoundTo(d, x);
  return v;
}

struct Stats {
  std::map<std::string, std::set<DType>> checked;  // op -> dtypes.
  int64_t cases = 0;                               // Evaluations compared.
  int64_t values = 0;                              // Output values compared.
  std::vector<std::string> exempt;
};

Stats& GlobalStats() {
  static Stats* s = new Stats;
  return *s;
}

// Builds the node over placeholders; nullptr (and the status) if the op
// refuses these dtypes.
struct Built {
  Scope scope = Scope::NewRootScope();
  std::vector<Output> xs;
  Node* node = nullptr;
};

std::unique_ptr<Built> Build(const OpEntry& e, DType dtype,
                             const std::vector<TensorShape>& shapes) {
  auto b = std::make_unique<Built>();
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const DType d =
        e.inputs[i].dtype == DType::kInvalid ? dtype : e.inputs[i].dtype;
    b->xs.push_back(ops::Placeholder(b->scope, d, shapes[i]));
  }
  b->node = b->scope.WithOpName(e.op).AddNode(e.op, b->xs, e.attrs);
  return b;
}

DType InputDType(const OpEntry& e, int i, DType dtype) {
  return e.inputs[i].dtype == DType::kInvalid ? dtype : e.inputs[i].dtype;
}

// Runs the node on `in` and compares every output with the reference.
void CheckValues(const OpEntry& e, DType dtype, const Refs& in,
                 const std::string& what) {
  std::vector<TensorShape> shapes;
  for (const T64& t : in) shapes.push_back(t.shape);
  std::unique_ptr<Built> b = Build(e, dtype, shapes);
  ASSERT_TRUE(b->scope.ok()) << b->scope.status();
  FeedList feeds;
  for (size_t i = 0; i < in.size(); ++i) {
    feeds.push_back({b->xs[i], ToTensor(InputDType(e, i, dtype), in[i])});
  }
  std::vector<Output> fetches;
  for (int i = 0; i < b->node->num_outputs(); ++i) {
    fetches.push_back(Output(b->node, i));
  }
  Session session(b->scope.graph());
  std::vector<Tensor> got;
  ASSERT_TRUE(session.Run(feeds, fetches, &got).ok()) << what;
  const Refs want = e.ref(in, b->node->attrs());
  ASSERT_EQ(want.size(), e.outputs < 0 ? got.size() : size_t(e.outputs))
      << what;
  const double u =
      dtype == DType::kFloat32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -11);
  const double ulps = dtype == DType::kFloat32 ? e.ulps32 : e.ulps16;
  // Below the normals the spacing is fixed: a few of it.
  const double tiny = dtype == DType::kFloat32 ? 1.4e-45 : 6e-8;
  ++GlobalStats().cases;
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape) << what << " output " << k;
    const T64 g = FromTensor(got[k]);
    const DType od = got[k].dtype();
    int failures = 0;
    for (int64_t i = 0; i < g.size() && failures < 5; ++i) {
      const double w = IsFloat(od) ? RoundTo(od, want[k].v[i]) : want[k].v[i];
      const double a = g.v[i];
      ++GlobalStats().values;
      bool ok;
      if (std::isnan(w)) {
        ok = std::isnan(a);
      } else if (std::isinf(w)) {
        ok = a == w;
      } else {
        ok = std::fabs(a - want[k].v[i]) <=
             ulps * u * std::fabs(want[k].v[i]) + e.atol + 4 * tiny + 0.0;
        // The reference rounded once to the output's dtype is always
        // right (Cast to float16 from float32, say).
        ok = ok || a == w;
        if (!IsFloat(od)) ok = a == w;
      }
      if (!ok) {
        ++failures;
        std::string args;
        if (e.elementwise) {
          for (const T64& t : in) {
            absl::StrAppend(&args, args.empty() ? "" : ", ",
                            At(t, want[k].shape, i));
          }
        }
        ADD_FAILURE() << e.op << " " << DTypeName(dtype) << " " << what
                      << ": output " << k << "[" << i << "] = " << a
                      << ", reference " << want[k].v[i]
                      << (args.empty() ? "" : " at (" + args + ")")
                      << " (tolerance " << ulps << " ulp + " << e.atol << ")";
      }
    }
  }
}

Refs RandomInputs(const OpEntry& e, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  Refs in;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const InputSpec& s = e.inputs[i];
    const DType d = InputDType(e, i, dtype);
    T64 t{s.shape, std::vector<double>(s.shape.num_elements())};
    std::uniform_real_distribution<double> u(s.lo, s.hi);
    for (double& v : t.v) {
      v = IsFloat(d)
              ? RoundTo(d, u(rng))
              : std::floor(s.lo + (s.hi - s.lo + 1) *
                                      std::uniform_real_distribution<double>(
                                          0, 1)(rng));
      if (!IsFloat(d)) v = std::min(v, s.hi);
    }
    in.push_back(std::move(t));
  }
  if (e.derive) {
    e.derive(in);
    for (size_t i = 0; i < in.size(); ++i) {
      for (double& v : in[i].v) v = RoundTo(InputDType(e, i, dtype), v);
    }
  }
  return in;
}

// Every edge value (unary) or every pair of them (binary), within each
// input's edge domain; other inputs random.
std::vector<Refs> EdgeInputs(const OpEntry& e, DType dtype) {
  std::vector<int> floats;
  std::vector<std::vector<double>> edges;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    if (!IsFloat(InputDType(e, i, dtype))) continue;
    floats.push_back(i);
    edges.emplace_back();
    for (double v : EdgeValues(dtype)) {
      if (std::isnan(v) ||
          (v >= e.inputs[i].edge_lo && v <= e.inputs[i].edge_hi)) {
        edges.back().push_back(v);
      }
    }
    if (floats.size() == 2) break;
  }
  const int64_t m0 = edges.empty() ? 1 : edges[0].size();
  const int64_t m1 = edges.size() < 2 ? 1 : edges[1].size();
  const int64_t n = m0 * m1;
  Refs in = RandomInputs(e, dtype, 11);
  for (T64& t : in) {
    const std::vector<double> r = t.v;
    t.shape = TensorShape({n});
    t.v.resize(n);
    for (int64_t i = 0; i < n; ++i) t.v[i] = r[i % r.size()];
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!floats.empty()) in[floats[0]].v[i] = edges[0][i % m0];
    if (floats.size() >= 2) in[floats[1]].v[i] = edges[1][i / m0];
  }
  return {in};
}

// The same values rotated by 5 through a length-67 tensor land in the
// body and in the tail: their results must be bitwise equal.
void CheckPositionIndependent(const OpEntry& e, DType dtype) {
  Refs in = RandomInputs(e, dtype, 5);
  const std::vector<double> edges = EdgeValues(dtype);
  for (T64& t : in) {
    for (size_t i = 0; i < edges.size() && i < t.v.size(); i += 3) {
      t.v[i * 2] = edges[i];
    }
  }
  Refs rot = in;
  const int64_t n = in[0].size();
  for (size_t k = 0; k < in.size(); ++k) {
    for (int64_t i = 0; i < n; ++i) rot[k].v[(i + 5) % n] = in[k].v[i];
  }
  std::vector<TensorShape> shapes;
  for (const T64& t : in) shapes.push_back(t.shape);
  std::vector<std::vector<uint8_t>> bytes;
  for (const Refs* r : {&in, &rot}) {
    std::unique_ptr<Built> b = Build(e, dtype, shapes);
    ASSERT_TRUE(b->scope.ok()) << b->scope.status();
    FeedList feeds;
    for (size_t i = 0; i < r->size(); ++i) {
      feeds.push_back({b->xs[i], ToTensor(InputDType(e, i, dtype), (*r)[i])});
    }
    Session session(b->scope.graph());
    std::vector<Tensor> got;
    ASSERT_TRUE(session.Run(feeds, {Output(b->node, 0)}, &got).ok());
    const auto* p = static_cast<const uint8_t*>(got[0].raw_data());
    bytes.emplace_back(p, p + got[0].TotalBytes());
  }
  const size_t w = bytes[0].size() / n;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(0, std::memcmp(&bytes[0][i * w], &bytes[1][((i + 5) % n) * w], w))
        << e.op << " " << DTypeName(dtype) << ": element " << i
        << " differs at position " << (i + 5) % n;
  }
}

// AddGradients (float32) against central differences of the float64
// reference, for L = sum(r * y) over the float outputs.
void CheckGradient(const OpEntry& e) {
  const Refs in = RandomInputs(e, DType::kFloat32, 3);
  std::vector<TensorShape> shapes;
  for (const T64& t : in) shapes.push_back(t.shape);
  std::unique_ptr<Built> b = Build(e, DType::kFloat32, shapes);
  ASSERT_TRUE(b->scope.ok()) << b->scope.status();
  const AttrMap attrs = b->node->attrs();
  const Refs y0 = e.ref(in, attrs);
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-1, 1);
  Refs r;
  std::vector<Output> ys, grad_ys;
  const size_t n_grad = e.grad_outputs < 0
                            ? y0.size()
                            : std::min<size_t>(y0.size(), e.grad_outputs);
  for (size_t k = 0; k < n_grad; ++k) {
    if (!IsFloat(b->node->output_dtype(k))) continue;
    T64 rk = Like(y0[k]);
    for (double& v : rk.v) v = RoundTo(DType::kFloat32, u(rng));
    ys.push_back(Output(b->node, k));
    grad_ys.push_back(ops::Const(b->scope, ToTensor(DType::kFloat32, rk)));
    r.push_back(rk);
  }
  std::vector<Output> xs;
  std::vector<int> xi;
  for (size_t i = 0; i < in.size(); ++i) {
    if (IsFloat(InputDType(e, i, DType::kFloat32)) &&
        !e.no_grad_inputs.count(i)) {
      xs.push_back(b->xs[i]);
      xi.push_back(i);
    }
  }
  std::vector<Output> grads;
  ASSERT_TRUE(AddGradients(b->scope, ys, xs, grad_ys, &grads).ok());
  FeedList feeds;
  for (size_t i = 0; i < in.size(); ++i) {
    feeds.push_back(
        {b->xs[i], ToTensor(InputDType(e, i, DType::kFloat32), in[i])});
  }
  Session session(b->scope.graph());
  std::vector<Tensor> got;
  ASSERT_TRUE(session.Run(feeds, grads, &got).ok());
  auto loss = [&](const Refs& x) {
    const Refs y = e.ref(x, attrs);
    double l = 0;
    size_t j = 0;
    for (size_t k = 0; k < n_grad; ++k) {
      if (!IsFloat(b->node->output_dtype(k))) continue;
      for (int64_t i = 0; i < y[k].size(); ++i) l += r[j].v[i] * y[k].v[i];
      ++j;
    }
    return l;
  };
  ++GlobalStats().cases;
  for (size_t g = 0; g < xs.size(); ++g) {
    const T64 analytic = FromTensor(got[g]);
    int failures = 0;
    for (int64_t i = 0; i < in[xi[g]].size() && failures < 5; ++i) {
      Refs p = in, m = in;
      const double h = 1e-6 * std::max(1.0, std::fabs(in[xi[g]].v[i]));
      p[xi[g]].v[i] += h;
      m[xi[g]].v[i] -= h;
      const double fd = (loss(p) - loss(m)) / (2 * h);
      ++GlobalStats().values;
      const double err =
          std::fabs(analytic.v[i] - fd) / std::max(1.0, std::fabs(fd));
      if (!(err <= e.grad_tol)) {
        ++failures;
        ADD_FAILURE() << e.op << " gradient of input " << xi[g] << "[" << i
                      << "] = " << analytic.v[i] << ", finite differences "
                      << fd << " (x = " << in[xi[g]].v[i] << ")";
      }
    }
  }
}

// Saved to a GraphDef and imported into a new graph, the node has the same
// definition and gives the same bits.
void CheckGraphDefRoundTrip(const OpEntry& e) {
  const Refs in = RandomInputs(e, DType::kFloat32, 9);
  std::vector<TensorShape> shapes;
  for (const T64& t : in) shapes.push_back(t.shape);
  std::unique_ptr<Built> b = Build(e, DType::kFloat32, shapes);
  ASSERT_TRUE(b->scope.ok()) << b->scope.status();
  absl::StatusOr<GraphDef> def = ToGraphDef(*b->scope.graph());
  ASSERT_TRUE(def.ok()) << def.status();
  Graph imported;
  ASSERT_TRUE(ImportGraphDef(*def, &imported).ok()) << e.op;
  absl::StatusOr<GraphDef> again = ToGraphDef(imported);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(GraphDefDebugString(*def), GraphDefDebugString(*again)) << e.op;
  std::vector<std::vector<uint8_t>> bytes;
  for (const Graph* g : {static_cast<const Graph*>(b->scope.graph()),
                         static_cast<const Graph*>(&imported)}) {
    FeedList feeds;
    for (size_t i = 0; i < in.size(); ++i) {
      Node* x = g->FindNode(b->xs[i].node->name());
      ASSERT_NE(x, nullptr);
      feeds.push_back(
          {Output(x, 0), ToTensor(InputDType(e, i, DType::kFloat32), in[i])});
    }
    Node* n = g->FindNode(b->node->name());
    ASSERT_NE(n, nullptr) << e.op;
    Session session(g);
    std::vector<Tensor> got;
    ASSERT_TRUE(session.Run(feeds, {Output(n, 0)}, &got).ok()) << e.op;
    const auto* p = static_cast<const uint8_t*>(got[0].raw_data());
    bytes.emplace_back(p, p + got[0].TotalBytes());
  }
  EXPECT_EQ(bytes[0], bytes[1]) << e.op << " after a GraphDef round trip";
}

TEST(OpConformanceTest, EveryRegisteredOpHasAnEntry) {
  std::set<std::string> names, variants;
  for (const OpEntry& e : OpTable()) {
    EXPECT_TRUE(variants.insert(e.op + "/" + e.variant).second)
        << "two entries for " << e.op << " " << e.variant;
    names.insert(e.op);
    EXPECT_TRUE(OpRegistry::Global()->Find(e.op).ok())
        << "entry for unregistered op " << e.op;
    if (e.exempt.empty()) {
      EXPECT_TRUE(e.ulps32 <= 10 || !e.why_wide.empty())
          << e.op << ": a float32 tolerance of " << e.ulps32
          << " ulp (> 10) needs its reason";
    }
  }
  for (const OpDef* def : OpRegistry::Global()->ops()) {
    EXPECT_TRUE(names.count(def->name()))
        << "op '" << def->name()
        << "' has no entry in tests/op_conformance_test.cc's OpTable()";
  }
}

TEST(OpConformanceTest, EveryOpAgainstItsFloat64Reference) {
  Stats& stats = GlobalStats();
  for (const OpEntry& e : OpTable()) {
    if (!e.exempt.empty()) {
      stats.exempt.push_back(e.op);
      continue;
    }
    SCOPED_TRACE(e.op + " " + e.variant);
    for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
      {
        std::vector<TensorShape> shapes;
        for (const InputSpec& s : e.inputs) shapes.push_back(s.shape);
        std::unique_ptr<Built> b = Build(e, dtype, shapes);
        if (!b->scope.ok()) {
          EXPECT_EQ(dtype, DType::kFloat16) << b->scope.status();
          continue;  // float16 not registered for this op.
        }
      }
      stats.checked[e.op].insert(dtype);
      for (uint32_t seed : {1u, 2u}) {
        CheckValues(e, dtype, RandomInputs(e, dtype, seed), "random");
      }
      if (e.elementwise) {
        for (const Refs& in : EdgeInputs(e, dtype)) {
          CheckValues(e, dtype, in, "edge values");
        }
        CheckPositionIndependent(e, dtype);
      }
    }
    const OpDef* def = *OpRegistry::Global()->Find(e.op);
    if (e.grad && def->has_gradient()) CheckGradient(e);
    CheckGraphDefRoundTrip(e);
  }
  int64_t op_dtypes = 0;
  for (const auto& [op, dtypes] : stats.checked) op_dtypes += dtypes.size();
  std::printf(
      "op conformance: %zu ops checked, %lld op x dtype pairs, %lld cases, "
      "%lld values; %zu ops exempt: %s\n",
      stats.checked.size(), static_cast<long long>(op_dtypes),
      static_cast<long long>(stats.cases), static_cast<long long>(stats.values),
      stats.exempt.size(), absl::StrJoin(stats.exempt, ", ").c_str());
}

}  // namespace
}  // namespace ipuflow
