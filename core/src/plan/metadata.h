// Private to plan::build: the metadata a pass uploads into `scratch`
// (docs/spec/buffers.md §4.1–§4.4), each region its own access, and the reads of those regions by
// the ops that consume them. Region offsets come from the sizing under test (SubLayoutParams); the
// extents an upload writes come from op semantics (rows of the pass, the model's position
// streams).
#pragma once

#include <string>
#include <vector>

#include "builder.h"

namespace bufferlab::plan::detail {

struct MetaRegion {
  std::string name;  // "positions", "slots", "block_table", "seq_lens", "seq_slot",
                     // "stream_meta.<b>", "ptr_tables", "cu_seqlens", "kv_lens", "h_state"
  TensorRef ref;     // inside scratch
};

// The regions the pass uploads (none for a mixed step: its upload is out of scope, §4.3b).
std::vector<MetaRegion> metadata_regions(const Ctx& c);

// Reads of the uploaded regions named in `names` (all regions when empty), value
// "@meta.<name>". Regions the pass does not upload are skipped.
std::vector<Access> metadata_reads(const Ctx& c, const std::vector<std::string>& names = {});

// The uploaded regions that locate each sequence's recurrent state (GDN, Mamba-2: state slot
// of a decode row; stream bounds and state pointers of a co-dispatched prefill), plus `extra`
// regions; regions the pass does not upload are skipped by metadata_reads.
std::vector<Access> state_metadata(const Ctx& c, const std::vector<std::string>& extra = {});

// The upload steps (token ids, metadata regions, LoRA slots) before the first layer.
void emit_uploads(Builder& b, const Ctx& c);

}  // namespace bufferlab::plan::detail
