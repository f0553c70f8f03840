// Embedding, LM head and upload ops: footprints from the pass rows and the model widths.
#include "bufferlab/core/ops/embedding.h"

#include <string>

#include "bind_check.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "params_text.h"

namespace bufferlab {
namespace {

using detail::u;

}  // namespace

EmbeddingOp EmbeddingOp::make(uint64_t rows, uint64_t hidden, uint64_t vocab, BufferId out,
                              std::string output_value) {
  EmbeddingOp op;
  op.dims = {rows, hidden, vocab};
  op.token_ids = arena_tensor(BufferId::token_ids, 0, {rows}, DType::u32);
  op.table = pool_tensor({vocab, hidden}, DType::bf16);
  op.output = arena_tensor(out, 0, {rows, hidden}, DType::bf16);
  op.output_value = std::move(output_value);
  return op;
}

std::string EmbeddingOp::params() const {
  return "embedding(rows=" + u(dims.rows) + ",h=" + u(dims.hidden) + ",vocab=" + u(dims.vocab) +
         ",out=" + std::string(buffer_name(output.buffer)) + ")";
}

std::vector<Access> EmbeddingOp::accesses() const {
  return {{token_ids, AccessKind::read, "@token_ids"},
          {table, AccessKind::read, {}},
          {output, AccessKind::write, output_value}};
}

LmHeadOp LmHeadOp::make(uint64_t rows, uint64_t logits_rows, uint64_t hidden, uint64_t vocab,
                        std::string pass, LmHeadRows source_rows) {
  LmHeadOp op;
  op.dims = {rows, logits_rows, hidden, vocab};
  op.pass = std::move(pass);
  op.source_rows = source_rows;
  for (uint64_t r = 0; r < logits_rows; ++r) {
    // The rule is affine, so checking the last row of each part checks them all.
    if (r + 1 != logits_rows && r + 1 != source_rows.direct) continue;
    if (source_rows.source(r) >= rows)
      throw Error("lm_head(" + op.pass + "): logits row " + u(r) + " would read input row " +
                  u(source_rows.source(r)) + " of " + u(rows));
  }
  // The gather reads single rows of the final norm; its footprint is the rows they lie in.
  op.input = arena_tensor(BufferId::norm_output, 0, {rows, hidden}, DType::bf16);
  op.table = pool_tensor({vocab, hidden}, DType::bf16);
  op.output = arena_tensor(BufferId::logits, 0, {logits_rows, vocab}, DType::bf16);
  return op;
}

std::string LmHeadOp::params() const {
  return "lm_head(" + pass + ",logits_rows=" + u(dims.logits_rows) + ",h=" + u(dims.hidden) +
         ",vocab=" + u(dims.vocab) + ")";
}

LmHeadOp::Bound LmHeadOp::bind(const Workspace& ws) const {
  const detail::LazyParams p(*this);
  detail::require_elements(input, (Size(dims.rows) * dims.hidden).value(), p);
  detail::require_elements(table, (Size(dims.vocab) * dims.hidden).value(), p);
  detail::require_elements(output, (Size(dims.logits_rows) * dims.vocab).value(), p);
  return {ws.data<const uint16_t>(input), ws.data<const uint16_t>(table),
          ws.data<uint16_t>(output)};
}

std::vector<Access> LmHeadOp::accesses() const {
  return {{input, AccessKind::read, "final"},
          {table, AccessKind::read, {}},
          {output, AccessKind::write, "logits"}};
}

std::string UploadOp::params() const {
  std::string s = label + "(" + pass;
  for (const Region& r : regions)
    s += "," + r.name + "@" + u(r.ref.offset) + "+" + u(r.ref.bytes());
  return s + ")";
}

std::vector<Access> UploadOp::accesses() const {
  std::vector<Access> out;
  for (const Region& r : regions) out.push_back({r.ref, AccessKind::write, r.value});
  return out;
}

}  // namespace bufferlab
