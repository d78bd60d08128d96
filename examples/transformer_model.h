// A GPT-style character language model in the graph API (Radford et al.,
// "Language Models are Unsupervised Multitask Learners", 2019; the layout
// of Karpathy's nanoGPT, model.py): token and position embeddings, N
// pre-norm blocks (causal self-attention with H heads, a GELU MLP 4x wide,
// LayerNorm, dropout, residuals), a final LayerNorm and an output head
// tied to the token embedding (logits = h wte^T). ipuflow ops only.
//
// As the ConvNet (models.h), variables are created once and read where the
// model is applied; the pieces are separate so a pipeline can place them
// as Graphcore places BERT's (the embedding and the tied head on IPU 0, the
// blocks spread over the other IPUs: ../shared/reference
// ops_and_transformer.md, section 2).
//
//   models::TransformerConfig config;   // nanoGPT's CPU configuration
//   config.vocab = corpus.vocab_size();
//   models::TransformerParams params =
//       models::CreateTransformerParams(scope, config, /*seed=*/1);
//   Output logits = models::TransformerLogits(body, params, inputs);
//   Output loss = models::TransformerLoss(body, logits, targets);
#ifndef IPUFLOW_EXAMPLES_TRANSFORMER_MODEL_H_
#define IPUFLOW_EXAMPLES_TRANSFORMER_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/scope.h"

namespace ipuflow::models {

struct TransformerConfig {
  int64_t vocab = 0;     // Required.
  int64_t context = 64;  // Positions: the inputs' second dimension.
  int64_t layers = 4;
  int64_t width = 128;  // Divisible by heads.
  int64_t heads = 4;
  float dropout = 0.0f;  // After attention, its projection and the MLP.
  float layer_norm_epsilon = 1e-5f;  // PyTorch's nn.LayerNorm.
  // InvalidArgument naming the first field out of range.
  absl::Status Validate() const;
};

struct TransformerBlockParams {
  Output ln1_gamma, ln1_beta;
  Output attn_w, attn_b;  // [D, 3D], [3D]: the query, key and value.
  Output proj_w, proj_b;  // [D, D], [D].
  Output ln2_gamma, ln2_beta;
  Output fc_w, fc_b;    // [D, 4D], [4D].
  Output out_w, out_b;  // [4D, D], [D].
};

struct TransformerParams {
  TransformerConfig config;
  Output token_embedding;     // wte [V, D], also the output head.
  Output position_embedding;  // wpe [T, D].
  std::vector<TransformerBlockParams> blocks;
  Output lnf_gamma, lnf_beta;
};

// GPT-2's initialisation: weights N(0, 0.02), the residual projections'
// N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm gains 1. `seed` picks the
// values. `block_scopes`, when given, holds scopes for {embeddings and
// head, block 0, ..., block N-1} (e.g. on their IPUs).
TransformerParams CreateTransformerParams(
    const Scope& scope, const TransformerConfig& config, int64_t seed,
    const std::vector<Scope>& block_scopes = {});

// The pieces, for callers that place them. inputs: int32 [B, T] ids.
// Embed: [B, T, D]; Block: [B, T, D] -> [B, T, D] (`seed` keys its dropout
// masks); Head: [B, T, D] -> logits [B * T, V].
Output TransformerEmbed(const Scope& scope, const TransformerParams& params,
                        Output inputs, int64_t seed = 0);
Output TransformerBlock(const Scope& scope, const TransformerParams& params,
                        int layer, Output x, int64_t seed = 0);
Output TransformerHead(const Scope& scope, const TransformerParams& params,
                       Output x);
// All of them in order: logits [B * T, V].
Output TransformerLogits(const Scope& scope, const TransformerParams& params,
                         Output inputs, int64_t seed = 0);
// The mean next-character cross-entropy: logits [B * T, V], targets int32
// [B, T].
Output TransformerLoss(const Scope& scope, Output logits, Output targets);

// Parameters (weights and biases) of the model.
int64_t TransformerParameterCount(const TransformerConfig& config);

}  // namespace ipuflow::models

#endif  // IPUFLOW_EXAMPLES_TRANSFORMER_MODEL_H_
