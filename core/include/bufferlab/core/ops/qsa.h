// The QSA sparse-attention indexer over qsa_select_scratch (docs/spec/buffers.md §4.8,
// docs/spec/numerics.md §8): per slab of ≤ 2048 prefill rows, qk projection → q post-processing →
// block scores → top-k block lists, which the attention core of the same slab then reads.
// The regions sit at the offsets of a 2048-row slab whatever the slab's rows; every indexer
// layer reuses them. Decode rows select inside the decode kernel and never use the scratch
// (docs/spec/numerics.md §8: "Prefill selection uses qsa_select_scratch").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab {

// qk [2048, (nh+1)·ihd] bf16 | q_post [2048, nh, ihd] f32 | scores [2048, cdiv(max_seq_len,
// ratio)] f32 | lists [2048, index_topk/ratio] i32, back to back (§4.8).
struct QsaScratchLayout {
  static constexpr uint64_t kSlabRows = 2048;

  uint64_t n_heads = 0, head_dim = 0, ratio = 0;
  uint64_t qk_width = 0;     // (index_n_heads + 1) · index_head_dim: the heads' q and the key
  uint64_t score_width = 0;  // cdiv(max_seq_len, ratio) compressed blocks
  uint64_t list_width = 0;   // index_topk / ratio selected blocks
  uint64_t qk_offset = 0, q_post_offset = 0, scores_offset = 0, lists_offset = 0;
  uint64_t bytes = 0;  // end of the lists region

  // Throws Error without the indexer's selection (index_topk or ratio 0).
  static QsaScratchLayout make(const ModelConfig& config, uint64_t max_seq_len);
};

// One stage of the indexer on one slab (rows launch.row0.. of the prefill part).
struct QsaIndexerOp {
  enum class Stage {
    qk,     // norm_output rows → qk (the index heads' q and the shared key, one GEMM)
    prep,   // qk → q_post (RoPE, scale); the key goes to the compressed key cache
    score,  // q_post · pooled keys → scores (Σ_h relu(q_h·k_b)/sqrt(ihd))
    topk,   // scores → lists (top budget/ratio blocks, ascending, ties to the lower block)
  };
  struct Shape {
    Stage stage = Stage::qk;
    PrefillLaunch launch;  // rows ≤ 2048
    uint64_t hidden = 0;   // K of the qk GEMM
    QsaScratchLayout layout;
  };

  Shape dims;
  TensorRef in;  // qk: norm_output bf16 [rows, h]; then the previous stage's region
  TensorRef out;
  TensorRef weights;  // qk: W [qk_width, h]; score: the pooled key cache (outside the arena)
  bool reads_weights = false;
  std::vector<Access> meta;

  static QsaIndexerOp make(const ModelConfig& config, Stage stage, uint64_t max_seq_len,
                           const PrefillLaunch& launch, std::vector<Access> meta = {});

  const Shape& shape() const { return dims; }
  std::string name() const;  // qsa_qk | qsa_prep | qsa_score | qsa_topk
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
