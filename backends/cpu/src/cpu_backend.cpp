// CpuBackend: a host arena (64-byte aligned, so rows and SIMD loads start on cache lines),
// bounds-checked transfers through Workspace::resolve, and the ops of cpu_ops.h.
#include "bufferlab/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cpu_ops.h"

namespace bufferlab {
namespace {

constexpr uint64_t kHostAlignment = 64;

std::shared_ptr<std::byte> host_allocate(uint64_t bytes, const char* what) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte pool still gets a base.
  const uint64_t size = align_up(Size(bytes == 0 ? 1 : bytes), kHostAlignment).value();
  void* p = std::aligned_alloc(kHostAlignment, size);
  if (p == nullptr)
    throw Error(std::string("host allocation of the ") + what + " failed: " + std::to_string(size) +
                " bytes");
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  void upload(const Workspace& ws, const TensorRef& dst, const void* src) override {
    std::memcpy(host(ws).resolve(dst), src, dst.bytes());
  }
  void download(const Workspace& ws, const TensorRef& src, void* dst) override {
    std::memcpy(dst, host(ws).resolve(src), src.bytes());
  }
  void fill(const Workspace& ws, const TensorRef& t, uint8_t byte) override {
    std::memset(host(ws).resolve(t), byte, t.bytes());
  }
  void synchronize() override {}  // every CPU op has finished when it returns

  // Every kernel op of the registry (op_registry.h), defined below the class.
  BUFFERLAB_BACKEND_OVERRIDES

 protected:
  Workspace do_allocate(const Layout& layout, uint64_t weights_bytes) override {
    return Workspace(layout, host_allocate(layout.arena_bytes(), "arena"),
                     host_allocate(weights_bytes, "weight pool"), weights_bytes, MemorySpace::host);
  }
  void fill_arena(const Workspace& ws, uint8_t byte) override {
    std::memset(host(ws).arena_base(), byte, ws.layout().arena_bytes());
  }

 private:
  // The fixed working memory of the GEMM and MoE grouping kernels, set up once here
  // (execute() allocates nothing): see cpu_scratch.h.
  cpu::Scratch scratch_;

  // A device workspace handed to the CPU backend would be dereferenced on the host.
  static const Workspace& host(const Workspace& ws) {
    if (ws.where() != MemorySpace::host)
      throw Error("the cpu backend was given a device workspace");
    return ws;
  }
};

void CpuBackend::fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) {
  cpu::fused_add_rmsnorm(host(ws), op);
}

void CpuBackend::moe_router(const Workspace& ws, const MoeRouterOp& op) {
  cpu::moe_router(host(ws), op, kernel_mutant(), scratch_);
}

TopKDiagnostics CpuBackend::moe_topk(const Workspace& ws, const MoeTopKOp& op) {
  return cpu::moe_topk(host(ws), op, kernel_mutant());
}

void CpuBackend::moe_gather(const Workspace& ws, const MoeGatherOp& op) {
  cpu::moe_gather(host(ws), op, scratch_);
}

void CpuBackend::moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op) {
  cpu::moe_expert_gemm(host(ws), op, scratch_);
}

void CpuBackend::swiglu(const Workspace& ws, const SwigluOp& op) { cpu::swiglu(host(ws), op); }

void CpuBackend::moe_combine(const Workspace& ws, const MoeCombineOp& op) {
  cpu::moe_combine(host(ws), op);
}

void CpuBackend::gemm(const Workspace& ws, const GemmOp& op) { cpu::gemm(host(ws), op, scratch_); }

void CpuBackend::lm_head(const Workspace& ws, const LmHeadOp& op) {
  cpu::lm_head(host(ws), op, scratch_);
}

void CpuBackend::mhc_expand(const Workspace& ws, const MhcExpandOp& op) {
  cpu::mhc_expand(host(ws), op);
}

MhcDiagnostics CpuBackend::mhc_pre(const Workspace& ws, const MhcPreOp& op) {
  return cpu::mhc_pre(host(ws), op, kernel_mutant());
}

MhcDiagnostics CpuBackend::mhc_lowrank_split(const Workspace& ws, const MhcLowRankSplitOp& op) {
  return cpu::mhc_lowrank_split(host(ws), op);
}

MhcDiagnostics CpuBackend::mhc_lowrank_slab(const Workspace& ws, const MhcLowRankSlabOp& op) {
  return cpu::mhc_lowrank_slab(host(ws), op, scratch_);
}

void CpuBackend::mhc_post(const Workspace& ws, const MhcPostOp& op) {
  cpu::mhc_post(host(ws), op, kernel_mutant());
}

MhcDiagnostics CpuBackend::mhc_head(const Workspace& ws, const MhcHeadOp& op) {
  return cpu::mhc_head(host(ws), op);
}

void CpuBackend::gdn_conv(const Workspace& ws, const GdnConvOp& op) { cpu::gdn_conv(host(ws), op); }

void CpuBackend::gdn_gates(const Workspace& ws, const GdnGatesOp& op) {
  cpu::gdn_gates(host(ws), op);
}

void CpuBackend::gdn_chunk(const Workspace& ws, const GdnChunkOp& op) {
  cpu::gdn_chunk(host(ws), op, kernel_mutant());
}

void CpuBackend::gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op) {
  cpu::gdn_recurrent(host(ws), op);
}

void CpuBackend::gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op) {
  cpu::gdn_gated_norm(host(ws), op);
}

void CpuBackend::mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op) {
  cpu::mamba2_conv(host(ws), op);
}

void CpuBackend::mamba2_chunk(const Workspace& ws, const Mamba2ChunkOp& op) {
  cpu::mamba2_chunk(host(ws), op, kernel_mutant());
}

void CpuBackend::mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op) {
  cpu::mamba2_recurrent(host(ws), op);
}

void CpuBackend::mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op) {
  cpu::mamba2_gated_norm(host(ws), op);
}

void CpuBackend::attn_stage(const Workspace& ws, const AttnStageOp& op) {
  cpu::attn_stage(host(ws), op, kernel_mutant());
}

void CpuBackend::attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op) {
  cpu::attn_cache_write(host(ws), op, kernel_mutant());
}

void CpuBackend::attn_prefill(const Workspace& ws, const AttnPrefillOp& op) {
  cpu::attn_prefill(host(ws), op, kernel_mutant());
}

void CpuBackend::attn_decode(const Workspace& ws, const AttnDecodeOp& op) {
  cpu::attn_decode(host(ws), op, kernel_mutant());
}

void CpuBackend::splitk_merge(const Workspace& ws, const SplitKMergeOp& op) {
  cpu::splitk_merge(host(ws), op, kernel_mutant());
}

void CpuBackend::attn_gate(const Workspace& ws, const AttnGateOp& op) {
  cpu::attn_gate(host(ws), op, kernel_mutant());
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace bufferlab
