// STUB (being implemented): mHC ops on the CPU backend.
#include "bufferlab/core/error.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

void hc_expand(const Workspace&, const HcExpandOp&) { throw Error("hc_expand: not implemented"); }
HcDiagnostics hc_pre(const Workspace&, const HcPreOp&, Mutant) {
  throw Error("hc_pre: not implemented");
}
HcDiagnostics hc_lowrank_split(const Workspace&, const HcLowRankSplitOp&) {
  throw Error("hc_lowrank_split: not implemented");
}
HcDiagnostics hc_lowrank_slab(const Workspace&, const HcLowRankSlabOp&, Scratch&) {
  throw Error("hc_lowrank_slab: not implemented");
}
void hc_post(const Workspace&, const HcPostOp&, Mutant) { throw Error("hc_post: not implemented"); }
HcDiagnostics hc_head(const Workspace&, const HcHeadOp&) { throw Error("hc_head: not implemented"); }

}  // namespace bufferlab::cpu
