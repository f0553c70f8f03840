// CPU LM head (docs/spec/numerics.md §8, docs/spec/buffers.md §4.9): logits[r] = bf16(x[source(r)]
// · W_vocabᵀ) for the logits rows of the pass, through the tiled BF16 GEMM; the row gather is the
// A-row map.
#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "cpu_gemm.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

void lm_head(const Workspace& ws, const LmHeadOp& op, Scratch& scratch) {
  const LmHeadOp::Bound p = op.bind(ws);
  const auto [rows, logits_rows, hidden, vocab] = op.shape();
  const LmHeadRows src = op.source_rows;
  // The rule is affine and non-decreasing in each part: its last row of each part is its
  // largest source (make() checks the same; the descriptor may have been edited since).
  for (uint64_t r : {src.direct, logits_rows}) {
    if (r == 0 || r > logits_rows) continue;
    if (src.source(r - 1) >= rows)
      throw Error(op.params() + ": logits row " + std::to_string(r - 1) + " reads input row " +
                  std::to_string(src.source(r - 1)) + " of " + std::to_string(rows));
  }
  if (overlaps(p.input, rows * hidden * 2, p.output, logits_rows * vocab * 2))
    throw Error(op.params() + ": the input overlaps the logits");
  tiled_gemm<uint16_t>(
      logits_rows, hidden, vocab, p.table,
      [&](uint64_t r) { return p.input + src.source(r) * hidden; },
      [&](uint64_t r0, uint64_t m, uint64_t n0, uint64_t n, const float* c) {
        for (uint64_t i = 0; i < m; ++i) {
          uint16_t* o = p.output + (r0 + i) * vocab + n0;
          for (uint64_t j = 0; j < n; ++j) o[j] = f32_to_bf16_bits(c[i * kTileN + j]);
        }
      },
      scratch);
}

}  // namespace bufferlab::cpu
