// TEMPORARY (issue 17 in progress): the attention kernels not written yet refuse to run, as
// the `planned` status did. Each kernel file that lands removes its function from here.
#include "bufferlab/core/error.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

void attn_stage(const Workspace&, const AttnStageOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

void attn_cache_write(const Workspace&, const AttnCacheWriteOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

void attn_prefill(const Workspace&, const AttnPrefillOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

void attn_decode(const Workspace&, const AttnDecodeOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

void splitk_merge(const Workspace&, const SplitKMergeOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

void attn_gate(const Workspace&, const AttnGateOp& op, Mutant) {
  throw Error("cpu: no kernel yet for " + op.params());
}

}  // namespace bufferlab::cpu
