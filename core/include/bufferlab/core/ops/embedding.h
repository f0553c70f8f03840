// The ops at both ends of a pass: the embedding gather (token ids → rows of the residual
// stream, or of hidden_states for an mHC model's mhc_expand) and the LM head (the rows of
// docs/spec/buffers.md §4.9 → `logits`), plus the host uploads of the per-pass inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

struct EmbeddingOp {
  struct Shape {
    uint64_t rows = 0, hidden = 0, vocab = 0;
  };
  Shape dims;
  TensorRef token_ids, table, output;
  std::string output_value;

  // out: residual (starts the residual stream) or hidden_states (mHC: mhc_expand's input).
  static EmbeddingOp make(uint64_t rows, uint64_t hidden, uint64_t vocab, BufferId out,
                          std::string output_value);
  const Shape& shape() const { return dims; }
  std::string name() const { return "embedding"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// Which input row each logits row reads (docs/spec/buffers.md §4.9), as one affine rule so every
// backend computes it the same way: row r < direct reads input row r (decode / verify rows,
// the decode rows of a mixed step); row direct + i reads tail_base + i·tail_stride (a
// prefill's last token, the mixed step's prefill row at rung(n), one row per co-dispatched
// stream: the last token of each).
struct LmHeadRows {
  uint64_t direct = 0, tail_base = 0, tail_stride = 0;
  uint64_t source(uint64_t r) const {
    return r < direct ? r : tail_base + (r - direct) * tail_stride;
  }
};

// logits[r] = x[row_r] · W_vocabᵀ for the logits rows of the pass, gathered from the final
// norm's rows (docs/spec/numerics.md §8; which rows: docs/spec/buffers.md §4.9). BF16 in, FP32
// accumulate, BF16 out.
struct LmHeadOp {
  struct Shape {
    uint64_t rows = 0;         // rows of the pass the gather reads from
    uint64_t logits_rows = 0;  // rows written
    uint64_t hidden = 0, vocab = 0;
  };
  Shape dims;
  std::string pass;  // the pass, for params()
  LmHeadRows source_rows;
  TensorRef input, table, output;

  // source_rows: where each logits row comes from; make() checks every source row < rows.
  static LmHeadOp make(uint64_t rows, uint64_t logits_rows, uint64_t hidden, uint64_t vocab,
                       std::string pass, LmHeadRows source_rows);

  struct Bound {
    const uint16_t* input = nullptr;  // [rows, hidden]
    const uint16_t* table = nullptr;  // [vocab, hidden]
    uint16_t* output = nullptr;       // [logits_rows, vocab]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "lm_head"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// A host → device upload of named regions (token ids, metadata of §4.1–§4.4, LoRA slots):
// each region its own write access.
struct UploadOp {
  struct Region {
    std::string name;  // "positions", "slots", ...
    TensorRef ref;
    std::string value;  // "@meta.positions", ...
  };
  std::string label;  // "upload_metadata"
  std::string pass;
  std::vector<Region> regions;

  const std::vector<Region>& shape() const { return regions; }
  std::string name() const { return label; }
  std::string params() const;  // "upload_metadata(decode(n=3,rows=4),positions@32768+16,...)"
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
