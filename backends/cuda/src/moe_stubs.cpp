// TEMPORARY stubs so the tree builds while the CUDA MoE kernels are written. Deleted by them.
#include <string>

#include "bufferlab/core/error.h"
#include "moe_ops.h"

namespace bufferlab::cuda {
namespace {
[[noreturn]] void todo(const char* op) { throw Error(std::string(op) + ": not yet on the cuda backend"); }
}  // namespace
void moe_router(const Workspace&, const MoeRouterOp&, Mutant) { todo("moe_router"); }
TopKDiagnostics moe_topk(const Workspace&, const MoeTopKOp&, Mutant) { todo("moe_topk"); }
void moe_gather(const Workspace&, const MoeGatherOp&) { todo("moe_gather"); }
void moe_expert_gemm(const Workspace&, const MoeExpertGemmOp&) { todo("experts"); }
void swiglu(const Workspace&, const SwigluOp&) { todo("swiglu"); }
void moe_combine(const Workspace&, const MoeCombineOp&) { todo("moe_combine"); }
void gemm(const Workspace&, const GemmOp&) { todo("gemm"); }
void lm_head(const Workspace&, const LmHeadOp&) { todo("lm_head"); }
}  // namespace bufferlab::cuda
