// STUB (being implemented): mHC ops on the CUDA backend.
#include "bufferlab/core/error.h"
#include "mhc_ops.h"

namespace bufferlab::cuda {

void hc_expand(const Workspace&, const HcExpandOp&) { throw Error("hc_expand: not implemented"); }
HcDiagnostics hc_pre(LibraryContext&, const Workspace&, const HcPreOp&, Mutant) {
  throw Error("hc_pre: not implemented");
}
HcDiagnostics hc_lowrank_split(LibraryContext&, const Workspace&, const HcLowRankSplitOp&) {
  throw Error("hc_lowrank_split: not implemented");
}
HcDiagnostics hc_lowrank_slab(LibraryContext&, const Workspace&, const HcLowRankSlabOp&) {
  throw Error("hc_lowrank_slab: not implemented");
}
void hc_post(const Workspace&, const HcPostOp&, Mutant) { throw Error("hc_post: not implemented"); }
HcDiagnostics hc_head(LibraryContext&, const Workspace&, const HcHeadOp&) { throw Error("hc_head: not implemented"); }

}  // namespace bufferlab::cuda
