// Private to the attention emitters (emit_attention.cpp, emit_mla.cpp, emit_qsa.cpp): the
// pieces full/sliding attention and MLA share — metadata reads, the prefill launches (QSA
// slabs), the per-slab indexer and the O projection.
#pragma once

#include <string>
#include <vector>

#include "bufferlab/core/ops/attention.h"
#include "builder.h"

namespace bufferlab::plan::detail {

// Reads of the uploaded metadata regions `names`; with `stream_blocks`, also the per-stream
// blocks "stream_meta.<b>" of a co-dispatched pass. Regions the pass does not upload are
// skipped (metadata_reads).
std::vector<Access> attn_meta(const Ctx& c, std::vector<std::string> names,
                              bool stream_blocks = false);

// The O projection of an attention sub-block: `in` [T, K] → moe_output "@block_out", through
// o_latent when the model has the grouped low-rank O (o_groups, o_lora_rank > 0). Role o on
// the FP8 path axis (docs/spec/buffers.md §5 "Paths").
void emit_o_projection(Builder& b, const Ctx& c, const TensorRef& in, const std::string& value);

// True when the model has the indexer's selection scratch (index_topk and ratio > 0, §3
// row 29); a model without it has the 256-byte placeholder and no indexer steps.
bool qsa_selects(const Ctx& c);

// The prefill part of the pass as attention launches: slabs of ≤ 2048 rows when the indexer
// selects (each slab's lists live only until the next slab, §4.8), else one launch. Empty
// without a prefill part.
std::vector<PrefillLaunch> prefill_launches(const Ctx& c);

// The indexer steps of one slab; returns the lists region the slab's attention core reads.
TensorRef emit_qsa_slab(Builder& b, const Ctx& c, const PrefillLaunch& slab);

}  // namespace bufferlab::plan::detail
