// BufferSizes: the byte count of every workspace buffer for one (config, run shape, target,
// sizing) — docs/spec/buffers.md §2–§3 — plus the sub-layout parameters of that sizing (§2
// "Layout parameters belong to the layout under test").
#pragma once

#include <cstdint>

#include "bufferlab/core/buffer_registry.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/target.h"

namespace bufferlab {

// The parameters a sizing fixes for the sub-layouts of docs/spec/buffers.md §4. Verifiers and
// kernels read these from the sizing under test, never recompute them.
struct SubLayoutParams {
  uint64_t m = 0;              // max_batch_tokens
  uint64_t m_pad = 0;          // ceil16(m): rows the FP8 block-scaled GEMM writes
  uint64_t k_max = 0;          // ceil16(max(m, 3))
  uint64_t R = 0;              // decode-metadata rows
  uint64_t max_blocks = 0;     // block-table entries per sequence
  uint64_t pos_streams = 0;    // position streams the sizing provides (1 or 3)
  uint64_t moe_scratch = 0;    // base of the prefill metadata inside scratch (§4.1)
  uint64_t meta_base = 32768;  // base of decode/verify metadata inside scratch (§4.2)
  uint64_t verify_rows = 160;  // VERIFY_ROW_CAP
  uint64_t logits_tokens = 0;  // rows of `logits`
  uint64_t splitk_splits = 0;  // split count of split-K decode (pure function of target)
  uint64_t splitk_slots = 0;   // slots `splitk_workspace` holds
  uint64_t gdn_chunks = 0;     // nt of §4.5 (0 when gdn_fla_scratch is null)
  uint64_t mamba2_chunks = 0;  // nc of §4.6 (0 when ssd_scratch is null)
  uint64_t expert_width = 0;   // columns of expert_gate_out / expert_up_out rows
  // §4.4 staging: whether the kv_lens and h_state offsets account for the cu_seqlens region
  // (false only under mutant B3, the layout that forgot it).
  bool staging_cu_seqlens = true;

  friend bool operator==(const SubLayoutParams&, const SubLayoutParams&) = default;
};

struct BufferSizes {
#define BUFFERLAB_SIZE_FIELD(name, type, doc) uint64_t name = 0;
  BUFFERLAB_BUFFERS(BUFFERLAB_SIZE_FIELD)
#undef BUFFERLAB_SIZE_FIELD

  SubLayoutParams params;
  Sizing sizing;

  // The engine's entry point. Validates the config, run shape and sizing; throws Error
  // naming the field (and the formula's operands) when a size overflows 64 bits.
  static BufferSizes from_config(const ModelConfig& config, uint64_t max_batch_tokens,
                                 uint64_t max_seq_len, uint64_t kv_block_size,
                                 uint64_t max_batch_size, const Target& target = Target{},
                                 Sizing sizing = Sizing::spec());
  static BufferSizes from_config(const ModelConfig& config, const RunShape& shape,
                                 const Target& target = Target{}, Sizing sizing = Sizing::spec());

  uint64_t bytes(BufferId id) const;
  uint64_t& bytes(BufferId id);

  // The ledger: Σ of ALL fields, checked (throws Error on overflow).
  uint64_t total_bytes() const;
};

// Formulas shared by the sizing and by the consumers that must agree with it.
uint64_t padded_batch_rung(uint64_t n);  // smallest rung ≥ n, or n above 128
// Block-table entries per sequence (docs/spec/buffers.md §2 max_blocks) for a run shape.
uint64_t block_table_entries(const RunShape& shape);

// Offsets of the prefill metadata of docs/spec/buffers.md §2/§4.1 from its base, for `rows` token
// rows and `pos_streams` position streams: positions at 0, then slots, block table, seq_len; `end`
// is the region's size. The sizing lays it out for m rows; an upload of t tokens places its
// slots by t. Checked.
struct PrefillMetaOffsets {
  uint64_t slots = 0, block_table = 0, seq_len = 0, end = 0;
};
PrefillMetaOffsets prefill_meta_offsets(uint64_t rows, uint64_t pos_streams, uint64_t max_blocks);

// The co-dispatched staging of docs/spec/buffers.md §4.4 (n equal streams of L tokens), in order:
// moe, n per-stream meta blocks, positions (pos_streams strides), slots, two pointer tables,
// cu_seqlens, kv_lens, h_state; `end` = q12_bytes. With cu_seqlens_region = false the
// kv_lens and h_state offsets are computed as if cu_seqlens did not exist (mutant B3).
struct StagingLayout {
  uint64_t stream_meta = 0, stream_meta_stride = 0, positions = 0, positions_stride = 0, slots = 0,
           ptr_tables = 0, cu_seqlens = 0, kv_lens = 0, h_state = 0, end = 0;
};
StagingLayout staging_layout(uint64_t n, uint64_t L, uint64_t top_k, uint64_t pos_streams,
                             bool cu_seqlens_region = true);
// q12_bytes(n, L, top_k, pos_streams) of docs/spec/buffers.md §4.4: staging_layout(...).end.
uint64_t q12_bytes(uint64_t n, uint64_t L, uint64_t top_k, uint64_t pos_streams);

}  // namespace bufferlab
