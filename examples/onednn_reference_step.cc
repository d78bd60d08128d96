#include "examples/onednn_reference_step.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"

namespace ipuflow::examples {
namespace {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

memory::desc Md(const memory::dims& d, Tag t) { return {d, kF32, t}; }
// A transposed view of a row-major [rows, cols] matrix: [cols, rows].
memory::desc Transposed(int64_t rows, int64_t cols) {
  return {{cols, rows}, kF32, memory::dims{1, cols}};
}

// A trained tensor, its gradient and AdamW's moments, all in ipuflow's
// layout (filters HWIO, matrices [in, out]).
struct Param {
  memory value, grad;
  std::vector<float> m, v;
  Param(const dnnl::engine& e, const memory::desc& d)
      : value(d, e), grad(d, e), m(d.get_size() / 4), v(d.get_size() / 4) {}
  float* w() { return static_cast<float*>(value.get_data_handle()); }
  float* g() { return static_cast<float*>(grad.get_data_handle()); }
  int64_t size() const { return static_cast<int64_t>(m.size()); }
};

// `user` in the layout `want`: `user` itself, or a copy refreshed by Run.
struct Reordered {
  memory mem;
  std::optional<dnnl::reorder> reorder;
  memory from;
  Reordered(const dnnl::engine& e, const memory& user, const memory::desc& want,
            bool to_user = false) {
    if (want == user.get_desc()) {
      mem = user;
      return;
    }
    mem = memory(want, e);
    from = to_user ? mem : user;
    const memory& to = to_user ? user : mem;
    reorder = dnnl::reorder(from, to);
    to_ = to;
  }
  void Run(dnnl::stream& s) {
    if (reorder) reorder->execute(s, from, to_);
  }

 private:
  memory to_;
};

// y = conv(x, w) + b (5x5, stride 1, VALID) with both gradients; dx only
// when `backward_data`.
struct ConvLayer {
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_weights bww;
  std::optional<dnnl::convolution_backward_data> bwd;
  std::optional<Reordered> fwd_w, bww_dw, bwd_w;

  ConvLayer(const dnnl::engine& e, const memory::desc& x, const memory::desc& y,
            Param& w, Param& b, bool backward_data) {
    const memory::dims s = {1, 1}, p = {0, 0};
    const memory::desc any_w = Md(w.value.get_desc().dims(), Tag::any);
    const dnnl::convolution_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
         x, any_w, b.value.get_desc(), y, s, p, p},
        e);
    fwd = dnnl::convolution_forward(fpd);
    fwd_w.emplace(e, w.value, fpd.weights_desc());
    const dnnl::convolution_backward_weights::primitive_desc wpd(
        {dnnl::algorithm::convolution_direct, x, any_w, b.value.get_desc(), y,
         s, p, p},
        e, fpd);
    bww = dnnl::convolution_backward_weights(wpd);
    bww_dw.emplace(e, w.grad, wpd.diff_weights_desc(), /*to_user=*/true);
    if (backward_data) {
      const dnnl::convolution_backward_data::primitive_desc dpd(
          {dnnl::algorithm::convolution_direct, x, any_w, y, s, p, p}, e, fpd);
      bwd = dnnl::convolution_backward_data(dpd);
      bwd_w.emplace(e, w.value, dpd.weights_desc());
    }
  }
};

// Max-pool 2x2 stride 2 then ReLU, forward and backward.
struct PoolRelu {
  dnnl::pooling_forward pool;
  dnnl::pooling_backward pool_bwd;
  dnnl::eltwise_forward relu;
  dnnl::eltwise_backward relu_bwd;
  memory workspace;

  PoolRelu(const dnnl::engine& e, const memory::desc& x,
           const memory::desc& y) {
    const memory::dims k = {2, 2}, p = {0, 0};
    const dnnl::pooling_forward::primitive_desc ppd(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, x, y,
         k, k, p, p},
        e);
    pool = dnnl::pooling_forward(ppd);
    workspace = memory(ppd.workspace_desc(), e);
    pool_bwd = dnnl::pooling_backward(
        {{dnnl::algorithm::pooling_max, x, y, k, k, p, p}, e, ppd});
    const auto relu_alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    const dnnl::eltwise_forward::primitive_desc rpd(
        {dnnl::prop_kind::forward_training, relu_alg, y, 0.0f}, e);
    relu = dnnl::eltwise_forward(rpd);
    relu_bwd = dnnl::eltwise_backward({{relu_alg, y, y, 0.0f}, e, rpd});
  }
};

// AdamW as torch.optim.AdamW (ops/state/apply_adam.h) on one tensor.
void AdamW(Param& p, float lr, int64_t t) {
  constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f, kDecay = 0.01f;
  const float c1 = lr / (1 - std::pow(kBeta1, float(t)));
  const float c2 = 1 / std::sqrt(1 - std::pow(kBeta2, float(t)));
  const float decay = 1 - lr * kDecay;
  float* w = p.w();
  const float* g = p.g();
  float* m = p.m.data();
  float* v = p.v.data();
  for (int64_t i = 0; i < p.size(); ++i) {
    m[i] = kBeta1 * m[i] + (1 - kBeta1) * g[i];
    v[i] = kBeta2 * v[i] + (1 - kBeta2) * g[i] * g[i];
    w[i] = w[i] * decay - c1 * m[i] / (std::sqrt(v[i]) * c2 + kEps);
  }
}

}  // namespace

struct OnednnConvNetStep::Impl {
  const int64_t n;
  const float lr;
  int64_t t = 0;
  dnnl::engine e{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{e};
  // Activation layouts (NHWC) and buffers.
  memory::desc x_md, c1_md, p1_md, c2_md, p2_md;
  memory c1, p1, r1, c2, p2, r2, h1, logits;
  memory dlogits, dh1, dz1, dr2, dp2, dc2, dr1, dp1, dc1;
  Param w1, b1, w2, b2, w3, b3, w4, b4;
  std::optional<ConvLayer> conv1, conv2;
  std::optional<PoolRelu> pool1, pool2;
  dnnl::matmul fc1, fc2, fc1_dw, fc1_dx, fc2_dw, fc2_dx;
  dnnl::eltwise_backward fc1_relu_bwd;

  Impl(int64_t batch, uint32_t seed, float learning_rate)
      : n(batch),
        lr(learning_rate),
        x_md(Md({n, 1, 28, 28}, Tag::nhwc)),
        c1_md(Md({n, 10, 24, 24}, Tag::nhwc)),
        p1_md(Md({n, 10, 12, 12}, Tag::nhwc)),
        c2_md(Md({n, 20, 8, 8}, Tag::nhwc)),
        p2_md(Md({n, 20, 4, 4}, Tag::nhwc)),
        w1(e, Md({10, 1, 5, 5}, Tag::hwio)),
        b1(e, Md({10}, Tag::x)),
        w2(e, Md({20, 10, 5, 5}, Tag::hwio)),
        b2(e, Md({20}, Tag::x)),
        w3(e, Md({320, 256}, Tag::ab)),
        b3(e, Md({1, 256}, Tag::ab)),
        w4(e, Md({256, 10}, Tag::ab)),
        b4(e, Md({1, 10}, Tag::ab)) {
    auto mem = [&](const memory::desc& d) { return memory(d, e); };
    c1 = mem(c1_md), p1 = mem(p1_md), r1 = mem(p1_md);
    c2 = mem(c2_md), p2 = mem(p2_md), r2 = mem(p2_md);
    dc1 = mem(c1_md), dp1 = mem(p1_md), dr1 = mem(p1_md);
    dc2 = mem(c2_md), dp2 = mem(p2_md), dr2 = mem(p2_md);
    const memory::desc flat = Md({n, 320}, Tag::ab),
                       hid = Md({n, 256}, Tag::ab), out = Md({n, 10}, Tag::ab);
    h1 = mem(hid), dh1 = mem(hid), dz1 = mem(hid);
    logits = mem(out), dlogits = mem(out);
    conv1.emplace(e, x_md, c1_md, w1, b1, /*backward_data=*/false);
    conv2.emplace(e, p1_md, c2_md, w2, b2, /*backward_data=*/true);
    pool1.emplace(e, c1_md, p1_md);
    pool2.emplace(e, c2_md, p2_md);
    // fc1 = relu(flat * w3 + b3), the ReLU fused as a post-op.
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr fused;
    fused.set_post_ops(relu);
    fc1 = dnnl::matmul(
        {{flat, w3.value.get_desc(), b3.value.get_desc(), hid}, fused, e});
    fc2 =
        dnnl::matmul({{hid, w4.value.get_desc(), b4.value.get_desc(), out}, e});
    // dw = x^T dy, dx = dy w^T (transposed views, no copies).
    fc2_dw =
        dnnl::matmul({{Transposed(n, 256), out, Md({256, 10}, Tag::ab)}, e});
    fc2_dx = dnnl::matmul({{out, Transposed(256, 10), hid}, e});
    fc1_dw =
        dnnl::matmul({{Transposed(n, 320), hid, Md({320, 256}, Tag::ab)}, e});
    fc1_dx = dnnl::matmul({{hid, Transposed(320, 256), flat}, e});
    const auto relu_alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    const dnnl::eltwise_forward::primitive_desc hint(
        {dnnl::prop_kind::forward_training, relu_alg, hid, 0.0f}, e);
    fc1_relu_bwd =
        dnnl::eltwise_backward({{relu_alg, hid, hid, 0.0f}, e, hint});
    Initialize(seed);
  }

  void Initialize(uint32_t seed) {
    std::mt19937 gen(seed);
    auto glorot = [&](Param& p, int64_t fan_in, int64_t fan_out) {
      const float limit = std::sqrt(6.0f / (fan_in + fan_out));
      std::uniform_real_distribution<float> dist(-limit, limit);
      for (int64_t i = 0; i < p.size(); ++i) p.w()[i] = dist(gen);
    };
    glorot(w1, 25, 250);
    glorot(w2, 250, 500);
    glorot(w3, 320, 256);
    glorot(w4, 256, 10);
    for (Param* b : {&b1, &b2, &b3, &b4}) std::fill_n(b->w(), b->size(), 0.0f);
  }

  // Forward to the mean loss; with `grad`, also dlogits.
  float Forward(const float* images, const int32_t* labels, bool grad) {
    memory x(x_md, e, const_cast<float*>(images));
    conv1->fwd_w->Run(s);
    conv1->fwd.execute(s, {{DNNL_ARG_SRC, x},
                           {DNNL_ARG_WEIGHTS, conv1->fwd_w->mem},
                           {DNNL_ARG_BIAS, b1.value},
                           {DNNL_ARG_DST, c1}});
    RunPoolRelu(*pool1, c1, p1, r1);
    conv2->fwd_w->Run(s);
    conv2->fwd.execute(s, {{DNNL_ARG_SRC, r1},
                           {DNNL_ARG_WEIGHTS, conv2->fwd_w->mem},
                           {DNNL_ARG_BIAS, b2.value},
                           {DNNL_ARG_DST, c2}});
    RunPoolRelu(*pool2, c2, p2, r2);
    memory flat(Md({n, 320}, Tag::ab), e, r2.get_data_handle());
    fc1.execute(s, {{DNNL_ARG_SRC, flat},
                    {DNNL_ARG_WEIGHTS, w3.value},
                    {DNNL_ARG_BIAS, b3.value},
                    {DNNL_ARG_DST, h1}});
    fc2.execute(s, {{DNNL_ARG_SRC, h1},
                    {DNNL_ARG_WEIGHTS, w4.value},
                    {DNNL_ARG_BIAS, b4.value},
                    {DNNL_ARG_DST, logits}});
    s.wait();
    return Loss(labels, grad);
  }

  void RunPoolRelu(PoolRelu& p, memory& in, memory& pooled, memory& out) {
    p.pool.execute(s, {{DNNL_ARG_SRC, in},
                       {DNNL_ARG_DST, pooled},
                       {DNNL_ARG_WORKSPACE, p.workspace}});
    p.relu.execute(s, {{DNNL_ARG_SRC, pooled}, {DNNL_ARG_DST, out}});
  }

  // Mean softmax cross-entropy of `logits`; dlogits = (softmax - onehot)/n.
  float Loss(const int32_t* labels, bool grad) {
    const float* z = static_cast<const float*>(logits.get_data_handle());
    float* dz = static_cast<float*>(dlogits.get_data_handle());
    double loss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = z + i * 10;
      const float mx = *std::max_element(row, row + 10);
      float sum = 0;
      for (int j = 0; j < 10; ++j) sum += std::exp(row[j] - mx);
      loss += std::log(sum) + mx - row[labels[i]];
      if (!grad) continue;
      for (int j = 0; j < 10; ++j) {
        dz[i * 10 + j] =
            (std::exp(row[j] - mx) / sum - (j == labels[i] ? 1 : 0)) / n;
      }
    }
    return static_cast<float>(loss / n);
  }

  // Sum over the batch of a [n, cols] gradient into a bias gradient.
  void BiasGrad(const memory& d, int64_t cols, Param& b) {
    const float* p = static_cast<const float*>(d.get_data_handle());
    float* g = b.g();
    std::fill_n(g, cols, 0.0f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < cols; ++j) g[j] += p[i * cols + j];
  }

  void Backward(const float* images) {
    memory x(x_md, e, const_cast<float*>(images));
    memory dflat(Md({n, 320}, Tag::ab), e, dr2.get_data_handle());
    fc2_dw.execute(
        s, {{DNNL_ARG_SRC, memory(Transposed(n, 256), e, h1.get_data_handle())},
            {DNNL_ARG_WEIGHTS, dlogits},
            {DNNL_ARG_DST, w4.grad}});
    fc2_dx.execute(s, {{DNNL_ARG_SRC, dlogits},
                       {DNNL_ARG_WEIGHTS, memory(Transposed(256, 10), e,
                                                 w4.value.get_data_handle())},
                       {DNNL_ARG_DST, dh1}});
    fc1_relu_bwd.execute(s, {{DNNL_ARG_DST, h1},
                             {DNNL_ARG_DIFF_DST, dh1},
                             {DNNL_ARG_DIFF_SRC, dz1}});
    fc1_dw.execute(
        s, {{DNNL_ARG_SRC, memory(Transposed(n, 320), e, r2.get_data_handle())},
            {DNNL_ARG_WEIGHTS, dz1},
            {DNNL_ARG_DST, w3.grad}});
    fc1_dx.execute(s, {{DNNL_ARG_SRC, dz1},
                       {DNNL_ARG_WEIGHTS, memory(Transposed(320, 256), e,
                                                 w3.value.get_data_handle())},
                       {DNNL_ARG_DST, dflat}});
    s.wait();
    BiasGrad(dlogits, 10, b4);
    BiasGrad(dz1, 256, b3);
    PoolReluBackward(*pool2, r2, dr2, dp2, dc2);
    ConvBackward(*conv2, r1, dc2, w2, b2, &dr1);
    PoolReluBackward(*pool1, r1, dr1, dp1, dc1);
    ConvBackward(*conv1, x, dc1, w1, b1, nullptr);
    s.wait();
  }

  void PoolReluBackward(PoolRelu& p, memory& out, memory& dout, memory& dpooled,
                        memory& din) {
    p.relu_bwd.execute(s, {{DNNL_ARG_DST, out},
                           {DNNL_ARG_DIFF_DST, dout},
                           {DNNL_ARG_DIFF_SRC, dpooled}});
    p.pool_bwd.execute(s, {{DNNL_ARG_DIFF_DST, dpooled},
                           {DNNL_ARG_DIFF_SRC, din},
                           {DNNL_ARG_WORKSPACE, p.workspace}});
  }

  void ConvBackward(ConvLayer& c, memory& x, memory& dy, Param& w, Param& b,
                    memory* dx) {
    c.bww.execute(s, {{DNNL_ARG_SRC, x},
                      {DNNL_ARG_DIFF_DST, dy},
                      {DNNL_ARG_DIFF_WEIGHTS, c.bww_dw->mem},
                      {DNNL_ARG_DIFF_BIAS, b.grad}});
    c.bww_dw->Run(s);
    if (dx == nullptr) return;
    c.bwd_w->Run(s);
    c.bwd->execute(s, {{DNNL_ARG_DIFF_DST, dy},
                       {DNNL_ARG_WEIGHTS, c.bwd_w->mem},
                       {DNNL_ARG_DIFF_SRC, *dx}});
  }
};

OnednnConvNetStep::OnednnConvNetStep(int64_t batch, uint32_t seed, float lr)
    : impl_(std::make_unique<Impl>(batch, seed, lr)) {}

OnednnConvNetStep::~OnednnConvNetStep() = default;

float OnednnConvNetStep::Forward(const float* images, const int32_t* labels) {
  return impl_->Forward(images, labels, /*grad=*/false);
}

float OnednnConvNetStep::Step(const float* images, const int32_t* labels) {
  Impl& m = *impl_;
  const float loss = m.Forward(images, labels, /*grad=*/true);
  m.Backward(images);
  ++m.t;
  for (Param* p : {&m.w1, &m.b1, &m.w2, &m.b2, &m.w3, &m.b3, &m.w4, &m.b4}) {
    AdamW(*p, m.lr, m.t);
  }
  return loss;
}

}  // namespace ipuflow::examples
