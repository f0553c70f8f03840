// plan::build: the steps of one launchable pass (docs/spec/buffers.md §2, §5) — uploads and the
// embedding, the representative layers (each sub-block preceded by its norm or mHC pre and
// followed by the mHC post), the final norm and the LM head rows.
#include "bufferlab/core/plan/pass_plan.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "bufferlab/core/error.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "builder.h"
#include "metadata.h"

namespace bufferlab::plan {
namespace {

using detail::arena;
using detail::Builder;
using detail::Ctx;
using detail::rd;
using detail::wr;

uint64_t layer_count(const ModelConfig& c) {
  const uint64_t n = c.layer_types.empty() ? c.num_hidden_layers : c.layer_types.size();
  return std::max<uint64_t>(n, 1);
}

bool has_mhc(const ModelConfig& c) { return c.hc_mult > 0; }

void emit_embedding(Builder& b, const Ctx& c) {
  // With mHC the embedding row feeds mhc_expand; otherwise it starts the residual stream.
  const bool hc = has_mhc(c.config);
  b.add(EmbeddingOp::make(c.T, c.config.hidden_size, c.config.vocab_size,
                          hc ? BufferId::hidden_states : BufferId::residual,
                          hc ? "@x" : "@residual"));
}

// The norm in front of a sub-block. Without mHC: a plain RMSNorm of the residual stream
// before the first sub-block, a fused add of the previous sub-block's output after that.
// With mHC: the block's own RMSNorm of the mhc_pre output, in place in norm_output.
void emit_block_norm(Builder& b, const Ctx& c, bool first, bool write_f32) {
  RmsNormVariant v;
  v.write_f32 = write_f32;
  RmsNormBuffers bufs;
  RmsNormValues vals;
  if (has_mhc(c.config)) {
    v.add_residual = false;
    bufs.residual = BufferId::norm_output;
    vals.residual_in = "norm";  // mhc_pre left the block input there
  } else if (first) {
    v.add_residual = false;
  } else {
    bufs.input = BufferId::moe_output;
  }
  b.add(FusedAddRmsNormOp::make(c.config, c.T, v, bufs, vals));
}

void emit_final_norm(Builder& b, const Ctx& c) {
  RmsNormVariant v;
  RmsNormBuffers bufs;
  RmsNormValues vals;
  vals.output = "final";
  if (has_mhc(c.config)) {
    detail::emit_mhc_head(b, c);
    v.add_residual = false;
    bufs.residual = BufferId::hidden_states;
    vals.residual_in = "@hc_head";
  } else {
    bufs.input = BufferId::moe_output;
  }
  b.add(FusedAddRmsNormOp::make(c.config, c.T, v, bufs, vals));
}

// LM head (docs/spec/numerics.md §8): the rows of docs/spec/buffers.md §4.9 gathered from the final
// norm.
void emit_lm_head(Builder& b, const Ctx& c) {
  b.add(LmHeadOp::make(c.T, c.pass.logits_rows(), c.config.hidden_size, c.config.vocab_size,
                       c.pass.to_string(), c.pass.logits_source_rows()));
}

void emit_mixer(Builder& b, const Ctx& c) {
  switch (c.mixer) {
    case MixerKind::full:
    case MixerKind::sliding:
      detail::emit_attention(b, c);
      return;
    case MixerKind::mla:
      detail::emit_mla(b, c);
      return;
    case MixerKind::gdn:
      detail::emit_gdn(b, c);
      return;
    case MixerKind::mamba2:
      detail::emit_mamba2(b, c);
      return;
    case MixerKind::none:
      return;
  }
}

void emit_ffn(Builder& b, const Ctx& c) {
  switch (c.ffn) {
    case FfnKind::dense:
      detail::emit_dense_ffn(b, c);
      return;
    case FfnKind::moe:
    case FfnKind::hash_moe:
      detail::emit_moe(b, c);
      return;
    case FfnKind::none:
      return;
  }
}

void emit_layer(Builder& b, Ctx c, uint64_t layer, bool& first_norm) {
  c.layer = layer;
  c.mixer = c.config.mixer_kind(layer);
  c.ffn = c.config.ffn_kind(layer);
  std::string L = "L";
  L += std::to_string(layer);
  // (std::string::append rather than operator+: GCC 12 warns falsely on the latter here.)
  auto label = [&](const char* kind) { return std::string(L).append(" ").append(kind); };
  const bool hc = has_mhc(c.config);
  if (c.mixer != MixerKind::none) {
    b.scope(label(to_string(c.mixer)), L + ".mixer.");
    if (hc) detail::emit_mhc_pre(b, c);
    emit_block_norm(b, c, first_norm, false);
    first_norm = false;
    emit_mixer(b, c);
    if (hc) detail::emit_mhc_post(b, c);
  }
  if (c.ffn != FfnKind::none) {
    b.scope(label(to_string(c.ffn)), L + ".ffn.");
    if (hc) detail::emit_mhc_pre(b, c);
    const bool f32 = c.ffn != FfnKind::dense && c.paths.router == RouterPath::fp32_routing;
    emit_block_norm(b, c, first_norm, f32);
    first_norm = false;
    emit_ffn(b, c);
    if (hc) detail::emit_mhc_post(b, c);
  }
}

}  // namespace

std::vector<uint64_t> representative_layers(const ModelConfig& c) {
  const uint64_t n = layer_count(c);
  auto kind = [&](uint64_t i) { return std::make_tuple(c.mixer_kind(i), c.ffn_kind(i)); };
  std::set<uint64_t> layers = {0, n - 1};
  std::set<std::tuple<MixerKind, FfnKind, MixerKind, FfnKind>> seen;
  for (uint64_t i = 0; i + 1 < n; ++i) {
    const auto [m0, f0] = kind(i);
    const auto [m1, f1] = kind(i + 1);
    if (seen.insert({m0, f0, m1, f1}).second) {
      layers.insert(i);
      layers.insert(i + 1);
    }
  }
  return {layers.begin(), layers.end()};
}

PassPlan build(const ModelConfig& config, const BufferSizes& sizes, const Target& target,
               const RunShape& shape, const Pass& pass, const Paths& paths) {
  pass.validate();
  PassPlan plan;
  plan.pass = pass;
  plan.paths = paths;
  plan.sizing = sizes.sizing.to_string();
  plan.shape = shape;
  if (auto why = pass.refusal(shape)) {
    plan.refused = *why;
    return plan;
  }
  const SubLayoutParams& lp = sizes.params;
  if (pass.kind == PassKind::codispatch) {
    // Eligibility with the same q12_bytes the layout under test uses (its pos_streams).
    plan.eligibility_bytes = q12_bytes(pass.n, pass.L, config.num_experts_per_tok, lp.pos_streams);
    if (plan.eligibility_bytes > sizes.scratch) {
      plan.ineligible = "q12_bytes(n=" + std::to_string(pass.n) + ", L=" + std::to_string(pass.L) +
                        ") = " + std::to_string(plan.eligibility_bytes) + " > scratch " +
                        std::to_string(sizes.scratch);
      return plan;
    }
  }
  Ctx c{config, sizes, lp, target, shape, pass, paths};
  c.T = pass.tokens();
  plan.layers = representative_layers(config);

  Builder b(plan);
  b.scope("pre", "pre.");
  detail::emit_uploads(b, c);
  emit_embedding(b, c);
  if (has_mhc(config)) detail::emit_mhc_expand(b, c);
  bool first_norm = true;
  for (uint64_t layer : plan.layers) emit_layer(b, c, layer, first_norm);
  b.scope("post", "post.");
  emit_final_norm(b, c);
  emit_lm_head(b, c);
  return plan;
}

}  // namespace bufferlab::plan
