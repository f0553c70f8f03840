// `bufferlab compare --op lm-head`: the LM head over decode-like rows (logits row r reads input
// row r, docs/spec/buffers.md §4.9), judged against the faithful oracle (oracle/moe_ffn_judge.h).
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/moe_ffn_judge.h"
#include "bufferlab/oracle/pool_placement.h"
#include "common/backend_bounds.h"
#include "common/human_bytes.h"
#include "compare/compare_ops.h"
#include "compare/compare_routing_dump.h"

namespace bufferlab::cli {

CompareResult compare_lm_head(Backend& backend, const CompareSetup& s) {
  const ModelConfig& cfg = s.config;
  const uint64_t h = cfg.hidden_size, vocab = cfg.vocab_size;
  // Decode-like rows: logits row r is the LM head of input row r (docs/spec/buffers.md §4.9).
  LmHeadOp op = LmHeadOp::make(s.tokens, s.tokens, h, vocab,
                               fmt::format("decode(rows={})", s.tokens), {s.tokens, 0, 0});
  const uint64_t pool = oracle::place_in_pool({&op.table});
  require_footprint_fits(op.params(), op.accesses(), s.layout, s.model_label, s.tokens);
  // Oracle: value and bound, one pass each over tokens × vocab × h.
  require_affordable(
      "--op lm-head", static_cast<double>(op.table.bytes()), 8.0,
      2.0 * static_cast<double>(s.tokens) * static_cast<double>(vocab) * static_cast<double>(h), s);
  oracle::LmHeadInputs in;
  in.input = oracle::seeded_bf16(s.tokens * h, s.seed, oracle::ValueProfile{});
  in.table = oracle::seeded_bf16(vocab * h, s.seed + 1,
                                 oracle::ValueProfile{1.0 / std::sqrt(static_cast<double>(h)), 0});
  const Workspace ws = backend.allocate(s.layout, pool);
  const oracle::LmHeadRun run = oracle::run_lm_head(backend, ws, op, in);
  const oracle::BoundModel bm = bounds_of(backend);
  CompareResult res;
  res.report = oracle::judge_lm_head(op, run, backend.name(), s.seed, bm);
  res.weight_pool_bytes = pool;
  res.header = fmt::format(
      "compare lm-head on {}, {} logits rows x vocab {}: arena {}, weight pool {}", s.model_label,
      s.tokens, vocab, human_bytes(s.layout.arena_bytes()), human_bytes(pool));
  if (!s.dump_dir.empty())
    write_lm_head_dump(s.dump_dir, op, in, run, res.report, s.model_label, s.seed, backend.name());
  return res;
}

}  // namespace bufferlab::cli
