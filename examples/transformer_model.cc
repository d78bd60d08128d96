#include "examples/transformer_model.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "ops/array/fill.h"
#include "ops/array/reshape.h"
#include "ops/array/split.h"
#include "ops/array/transpose.h"
#include "ops/math/add.h"
#include "ops/math/mat_mul.h"
#include "ops/nn/bias_add.h"
#include "ops/nn/dropout.h"
#include "ops/nn/embedding_lookup.h"
#include "ops/nn/gelu.h"
#include "ops/nn/scaled_dot_product_attention.h"
#include "ops/nn/sparse_softmax_cross_entropy_with_logits.h"
#include "ops/norm/layer_norm.h"
#include "ops/state/random.h"
#include "ops/state/read_variable.h"
#include "ops/state/variable.h"

namespace ipuflow::models {
namespace {

constexpr float kInitStddev = 0.02f;

Output Weight(const Scope& scope, const std::string& name,
              const TensorShape& shape, float stddev, int64_t seed) {
  return ops::Variable(scope.WithOpName(name),
                       ops::RandomNormal(scope, shape, 0, stddev, seed))
      .handle;
}

Output Constant(const Scope& scope, const std::string& name, int64_t size,
                double value) {
  return ops::Variable(scope.WithOpName(name), ops::Fill(scope, {size}, value))
      .handle;
}

Output Read(const Scope& scope, Output handle) {
  return ops::ReadVariable(scope, handle);
}

// x [N, in] W + b.
Output Linear(const Scope& scope, Output x, Output w, Output b) {
  return ops::BiasAdd(scope, ops::MatMul(scope, x, Read(scope, w)),
                      Read(scope, b));
}

Output Norm(const Scope& scope, const TransformerConfig& c, Output x,
            Output gamma, Output beta) {
  ops::LayerNormOptions o;
  o.epsilon = c.layer_norm_epsilon;
  return ops::LayerNorm(scope, x, Read(scope, gamma), Read(scope, beta), o).y;
}

Output Drop(const Scope& scope, const TransformerConfig& c, Output x,
            int64_t seed) {
  if (c.dropout <= 0) return x;
  return ops::Dropout(scope, x, c.dropout, seed).output;
}

}  // namespace

absl::Status TransformerConfig::Validate() const {
  auto bad = [](const char* field, int64_t value, const std::string& rule) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer: ", field, " ", value, " ", rule));
  };
  if (vocab < 1) return bad("vocab", vocab, "must be positive");
  if (context < 1 || context > (int64_t{1} << 20)) {
    return bad("context", context, "must be in [1, 2^20]");
  }
  if (layers < 1 || layers > 1024)
    return bad("layers", layers, "not in [1, 1024]");
  if (heads < 1 || width < 1 || width > (int64_t{1} << 16) ||
      width % heads != 0) {
    return bad(
        "width", width,
        absl::StrCat("must be in [1, 65536] and divisible by heads ", heads));
  }
  // The largest tables (the embeddings, an MLP weight) under 2^28
  // elements each: 1 GiB of float32.
  constexpr int64_t kMaxTable = int64_t{1} << 28;
  if (vocab > kMaxTable / width || context > kMaxTable / width ||
      4 * width > kMaxTable / width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transformer: vocab ", vocab, ", context ", context, " or 4 x width ",
        4 * width, " times width ", width, " is over 2^28 elements"));
  }
  if (!(dropout >= 0 && dropout < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer: dropout ", dropout, " is not in [0, 1)"));
  }
  if (!(layer_norm_epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("transformer: layer_norm_epsilon ", layer_norm_epsilon,
                     " must be positive"));
  }
  return absl::OkStatus();
}

TransformerParams CreateTransformerParams(
    const Scope& scope, const TransformerConfig& config, int64_t seed,
    const std::vector<Scope>& block_scopes) {
  auto at = [&](size_t i) {
    return block_scopes.size() > i ? block_scopes[i] : scope;
  };
  TransformerParams p;
  p.config = config;
  const int64_t d = config.width;
  // Each variable its own stream: seed * 1000 + a running index.
  int64_t stream = seed * 1000;
  const Scope e = at(0).NewSubScope("embedding");
  p.token_embedding =
      Weight(e, "wte", {config.vocab, d}, kInitStddev, ++stream);
  p.position_embedding =
      Weight(e, "wpe", {config.context, d}, kInitStddev, ++stream);
  const float residual =
      kInitStddev / std::sqrt(2.0f * static_cast<float>(config.layers));
  for (int64_t l = 0; l < config.layers; ++l) {
    const Scope s =
        at(static_cast<size_t>(l) + 1).NewSubScope(absl::StrCat("block", l));
    TransformerBlockParams b;
    b.ln1_gamma = Constant(s, "ln1_gamma", d, 1);
    b.ln1_beta = Constant(s, "ln1_beta", d, 0);
    b.attn_w = Weight(s, "attn_w", {d, 3 * d}, kInitStddev, ++stream);
    b.attn_b = Constant(s, "attn_b", 3 * d, 0);
    b.proj_w = Weight(s, "proj_w", {d, d}, residual, ++stream);
    b.proj_b = Constant(s, "proj_b", d, 0);
    b.ln2_gamma = Constant(s, "ln2_gamma", d, 1);
    b.ln2_beta = Constant(s, "ln2_beta", d, 0);
    b.fc_w = Weight(s, "fc_w", {d, 4 * d}, kInitStddev, ++stream);
    b.fc_b = Constant(s, "fc_b", 4 * d, 0);
    b.out_w = Weight(s, "out_w", {4 * d, d}, residual, ++stream);
    b.out_b = Constant(s, "out_b", d, 0);
    p.blocks.push_back(b);
  }
  const Scope h = at(0).NewSubScope("head");
  p.lnf_gamma = Constant(h, "lnf_gamma", d, 1);
  p.lnf_beta = Constant(h, "lnf_beta", d, 0);
  return p;
}

Output TransformerEmbed(const Scope& scope, const TransformerParams& params,
                        Output inputs, int64_t seed) {
  const Scope s = scope.NewSubScope("embed");
  Output tokens = ops::EmbeddingLookup(s, Read(s, params.token_embedding),
                                       inputs);  // [B, T, D]
  // [B, T, D] + [T, D]: every sequence starts at position 0.
  Output x = ops::Add(s, tokens, Read(s, params.position_embedding));
  return Drop(s, params.config, x, seed);
}

Output TransformerBlock(const Scope& scope, const TransformerParams& params,
                        int layer, Output x, int64_t seed) {
  const TransformerConfig& c = params.config;
  const TransformerBlockParams& b = params.blocks[layer];
  const Scope s = scope.NewSubScope(absl::StrCat("block", layer));
  const TensorShape& shape = x.shape();  // [B, T, D]
  const int64_t batch = shape.dim(0), t = shape.dim(1), d = c.width;
  const int64_t h = c.heads, hd = d / h;
  // Attention: x + proj(attention(ln1(x))).
  Output a =
      ops::Reshape(s, Norm(s, c, x, b.ln1_gamma, b.ln1_beta), {batch * t, d});
  std::vector<Output> qkv =
      ops::Split(s, Linear(s, a, b.attn_w, b.attn_b), 3, -1);
  auto heads = [&](Output v) {  // [B*T, D] -> [B, H, T, hd]
    return ops::Transpose(s, ops::Reshape(s, v, {batch, t, h, hd}),
                          {0, 2, 1, 3});
  };
  Output att = ops::ScaledDotProductAttention(s, heads(qkv[0]), heads(qkv[1]),
                                              heads(qkv[2]), {.causal = true})
                   .output;  // [B, H, T, hd]
  att = ops::Reshape(s, ops::Transpose(s, att, {0, 2, 1, 3}), {batch * t, d});
  att = Drop(s, c, Linear(s, att, b.proj_w, b.proj_b), seed * 2 + 1);
  x = ops::Add(s, x, ops::Reshape(s, att, {batch, t, d}));
  // MLP: x + out(gelu(fc(ln2(x)))).
  Output m =
      ops::Reshape(s, Norm(s, c, x, b.ln2_gamma, b.ln2_beta), {batch * t, d});
  m = ops::Gelu(s, Linear(s, m, b.fc_w, b.fc_b));
  m = Drop(s, c, Linear(s, m, b.out_w, b.out_b), seed * 2 + 2);
  return ops::Add(s, x, ops::Reshape(s, m, {batch, t, d}));
}

Output TransformerHead(const Scope& scope, const TransformerParams& params,
                       Output x) {
  const Scope s = scope.NewSubScope("head");
  const TensorShape& shape = x.shape();
  Output h = ops::Reshape(
      s, Norm(s, params.config, x, params.lnf_gamma, params.lnf_beta),
      {shape.dim(0) * shape.dim(1), params.config.width});
  // Tied: the token embedding read again, its gradient summed with the
  // lookup's by autodiff.
  return ops::MatMul(s, h, Read(s, params.token_embedding),
                     /*transpose_a=*/false, /*transpose_b=*/true);
}

Output TransformerLogits(const Scope& scope, const TransformerParams& params,
                         Output inputs, int64_t seed) {
  Output x = TransformerEmbed(scope, params, inputs, seed * 1000);
  for (int l = 0; l < static_cast<int>(params.blocks.size()); ++l) {
    x = TransformerBlock(scope, params, l, x, seed * 1000 + 10 * (l + 1));
  }
  return TransformerHead(scope, params, x);
}

Output TransformerLoss(const Scope& scope, Output logits, Output targets) {
  const TensorShape& shape = targets.shape();
  return ops::SoftmaxCrossEntropyLoss(
      scope, logits,
      ops::Reshape(scope, targets, {shape.dim(0) * shape.dim(1)}));
}

int64_t TransformerParameterCount(const TransformerConfig& c) {
  const int64_t d = c.width;
  const int64_t block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d +
                        (4 * d * d + 4 * d) + (4 * d * d + d);
  return c.vocab * d + c.context * d + c.layers * block + 2 * d;
}

}  // namespace ipuflow::models
