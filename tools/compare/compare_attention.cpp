// The attention runners of `bufferlab compare` (compare_ops.h): attn-prefill — the prefill chain
// Q copy / K scratch / V scratch (qk_norm + RoPE), cache write, the varlen core over the prefix in
// the paged cache and the chunk, the gate — and attn-decode — the decode rows' cache write (the
// stage function on the qkv rows), the core (split-K and merge, or one split), the gate. One
// pass of the model's full or sliding layer (--layer) on the model's real arena (m = the pass's
// rows), the K/V cache in the weight pool with a shuffled physical block numbering; every stage
// judged on the backend's own stored inputs (oracle/attention_judge.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/target.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/attention_inputs.h"
#include "bufferlab/oracle/attention_judge.h"
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {
namespace {

// The layer kind judged: --layer, else the model's first attention layer kind.
bool sliding_layer(const CompareSetup& s) {
  const ModelConfig& c = s.config;
  if (s.attn.layer) {
    const bool sliding = *s.attn.layer == AttnLayerKind::sliding;
    if (sliding && c.sliding_window == 0)
      throw Error(fmt::format("--layer sliding: {} has no sliding window (sliding_window = 0)",
                              s.model_label));
    return sliding;
  }
  for (uint64_t l = 0; l < c.num_hidden_layers; ++l) {
    const MixerKind k = c.mixer_kind(l);
    if (k == MixerKind::full || k == MixerKind::sliding) return k == MixerKind::sliding;
  }
  return false;
}

void require_attention(const CompareSetup& s, const char* op) {
  const ModelConfig& c = s.config;
  bool any = false;
  for (uint64_t l = 0; l < c.num_hidden_layers && !any; ++l)
    any = c.mixer_kind(l) == MixerKind::full || c.mixer_kind(l) == MixerKind::sliding;
  if (!any || c.num_attention_heads == 0 || c.head_dim == 0)
    throw Error(fmt::format(
        "{} has no grouped-query attention layer: --op {} needs one (MLA models: not yet)",
        s.model_label, op));
}

// The run shape's max_seq_len: the default, or the sequence when longer (positions must stay
// below it: docs/spec/attention.md "Bad input").
uint64_t run_max_seq_len(uint64_t sequence) {
  return std::max<uint64_t>(RunShape{}.max_seq_len, sequence);
}

// The real arena of a pass of `rows` rows (m = rows), sizing corrected.
Layout real_layout(const CompareSetup& s, uint64_t rows, uint64_t max_seq_len) {
  RunShape shape;
  shape.max_batch_tokens = rows;
  shape.max_seq_len = max_seq_len;
  return Layout::build(BufferSizes::from_config(s.config, shape, Target{}, Sizing::corrected()));
}

// Runs one pass on the real arena (its footprint checked to fit first) and judges it; the
// report's checks get `suffix` (a chunk's name) when one is given.
void run_pass(Backend& backend, const CompareSetup& s, const oracle::AttnCase& c,
              const Layout& layout, oracle::AgreementReport& report, oracle::AttnRun& run,
              const std::string& suffix) {
  const oracle::AttnPlan plan = oracle::plan_attention(c);
  require_footprint_fits("attention pass", plan.accesses(), layout, s.model_label, c.pass_rows());
  const Workspace ws = backend.allocate(layout, plan.pool_bytes);
  run = oracle::run_attention(backend, ws, plan, c);
  const oracle::AgreementReport r =
      oracle::judge_attention(c, run, backend.name(), s.seed, bounds_of(backend));
  if (report.op.empty()) {
    report.op = r.op;
    report.params = r.params;
    report.backend = r.backend;
    report.seed = r.seed;
  }
  for (oracle::TensorComparison t : r.checks) {
    if (!suffix.empty()) t.name += " " + suffix;
    report.checks.push_back(std::move(t));
  }
  for (oracle::TensorComparison t : r.reported) {
    if (!suffix.empty()) t.name += " " + suffix;
    report.reported.push_back(std::move(t));
  }
}

std::string layer_text(bool sliding, const ModelConfig& c) {
  return sliding ? fmt::format("sliding layer (W = {})", c.sliding_window) : "full layer";
}

}  // namespace

CompareResult compare_attn_prefill(Backend& backend, const CompareSetup& s) {
  require_attention(s, "attn-prefill");
  const bool sliding = sliding_layer(s);
  const uint64_t streams = s.attn.streams ? s.attn.streams->value : 1;
  const uint64_t context = s.attn.context ? s.attn.context->value : 0;
  const uint64_t L = s.tokens;
  const uint64_t chunk = s.attn.chunk ? s.attn.chunk->value : L;
  if (chunk == 0) throw Error("--chunk 0: a chunk needs at least one token");

  oracle::AttnCaseSpec spec;
  spec.config = s.config;
  spec.sliding = sliding;
  spec.streams = streams;
  spec.L = L;
  spec.context = {context};
  // The run shape's limit (MRoPE's h and w positions run ahead of the token's own).
  spec.max_seq_len = run_max_seq_len(context + L);
  const oracle::AttnCase whole = oracle::make_attn_case(spec, s.seed);
  const uint64_t chunk_rows = std::min(chunk, L);
  const Layout layout = real_layout(s, streams * chunk_rows, spec.max_seq_len);

  CompareResult res;
  oracle::AttnRun run;
  std::vector<uint16_t> k_cache = whole.k_cache, v_cache = whole.v_cache;
  const uint64_t chunks = (L + chunk_rows - 1) / chunk_rows;
  for (uint64_t i0 = 0, k = 0; i0 < L; i0 += chunk_rows, ++k) {
    const uint64_t i1 = std::min(i0 + chunk_rows, L);
    const oracle::AttnCase c =
        chunks == 1 ? whole : oracle::prefill_chunk(whole, i0, i1, k_cache, v_cache);
    run_pass(backend, s, c, layout, res.report, run,
             chunks == 1 ? "" : fmt::format("[chunk {}/{}]", k + 1, chunks));
    k_cache = run.k_cache;
    v_cache = run.v_cache;
  }
  res.header = fmt::format(
      "compare attn-prefill: {}; {} stream{} of {} tokens after {} cached{}; {}; {}; on {}; arena "
      "{}",
      whole.geom.to_string(), streams, streams == 1 ? "" : "s", L, context,
      chunks == 1 ? "" : fmt::format(", in {} chunks of {}", chunks, chunk_rows),
      layer_text(sliding, s.config),
      fmt::format("KV cache {} blocks of {}", whole.cache.num_blocks, whole.cache.block_size),
      s.model_label, human_bytes(layout.arena_bytes()));
  res.extra_json["layer"] = sliding ? "sliding" : "full";
  res.extra_json["streams"] = streams;
  res.extra_json["context"] = context;
  res.extra_json["chunks"] = chunks;
  return res;
}

CompareResult compare_attn_decode(Backend& backend, const CompareSetup& s) {
  require_attention(s, "attn-decode");
  const bool sliding = sliding_layer(s);
  const uint64_t rows = s.tokens;
  const uint64_t context = s.attn.context ? s.attn.context->value : 0;
  oracle::AttnCaseSpec spec;
  spec.config = s.config;
  spec.sliding = sliding;
  spec.decode_rows = rows;
  spec.live = rows;
  // The split count is the launch's pure function of (target, nq, R) (docs/spec/numerics.md §8).
  spec.splits = splitk_splits(Target{}, s.config.num_attention_heads, rows);
  spec.decode_context = {context};
  spec.max_seq_len = run_max_seq_len(context + 1);
  const oracle::AttnCase c = oracle::make_attn_case(spec, s.seed);
  const Layout layout = real_layout(s, rows, spec.max_seq_len);
  CompareResult res;
  oracle::AttnRun run;
  run_pass(backend, s, c, layout, res.report, run, "");
  res.header = fmt::format(
      "compare attn-decode: {}; {} decode row{} of {} cached keys each, {} split{}; {}; KV cache "
      "{} blocks of {}; on {}; arena {}",
      c.geom.to_string(), rows, rows == 1 ? "" : "s", context, spec.splits,
      spec.splits == 1 ? "" : "s", layer_text(sliding, s.config), c.cache.num_blocks,
      c.cache.block_size, s.model_label, human_bytes(layout.arena_bytes()));
  res.extra_json["layer"] = sliding ? "sliding" : "full";
  res.extra_json["context"] = context;
  res.extra_json["splits"] = spec.splits;
  return res;
}

}  // namespace bufferlab::cli
