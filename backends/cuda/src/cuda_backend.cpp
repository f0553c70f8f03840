// CudaBackend: a device arena and weight pool from plain cudaMalloc, transfers and fills
// through Workspace::resolve (bounds-checked before any pointer reaches the runtime), and the
// kernels of this folder on the default stream. Every runtime call is checked. The library
// workspace (cuBLAS handle, its workspace, GEMM staging, grouping buffers, counters) is one
// fixed block made with the backend (cublas_context.h); no op allocates device memory.
#include "bufferlab/cuda/cuda_backend.h"

#include "cuda_platform.h"

#include <memory>
#include <string>

#include "attention_ops.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "cublas_context.h"
#include "cuda_check.h"
#include "gdn_ops.h"
#include "mamba2_ops.h"
#include "mhc_ops.h"
#include "moe_ops.h"
#include "rmsnorm_kernel.h"

namespace bufferlab {
namespace BUFFERLAB_CUDA_NS {
std::unique_ptr<Backend> make_kernel_backend();
}  // namespace BUFFERLAB_CUDA_NS

namespace {

std::shared_ptr<std::byte> device_allocate(uint64_t bytes) {
  void* p = nullptr;
  // A zero-byte pool still gets a base, so a Workspace never holds a null pool.
  BUFFERLAB_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  // cudaFree's status cannot be reported from a deleter; a failure here means the context is
  // already gone, which the next checked call reports.
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { cudaFree(q); });
}

class CudaBackend final : public Backend {
 public:
#if defined(BUFFERLAB_CUDA_SIM)
  std::string name() const override { return "cuda-sim"; }
#else
  std::string name() const override { return "cuda"; }
#endif

  void upload(const Workspace& ws, const TensorRef& dst, const void* src) override {
    BUFFERLAB_CUDA_CHECK(
        cudaMemcpy(device(ws).resolve(dst), src, dst.bytes(), cudaMemcpyHostToDevice));
  }
  void download(const Workspace& ws, const TensorRef& src, void* dst) override {
    BUFFERLAB_CUDA_CHECK(
        cudaMemcpy(dst, device(ws).resolve(src), src.bytes(), cudaMemcpyDeviceToHost));
  }
  void fill(const Workspace& ws, const TensorRef& t, uint8_t byte) override {
    BUFFERLAB_CUDA_CHECK(cudaMemset(device(ws).resolve(t), byte, t.bytes()));
  }
  void synchronize() override {
    BUFFERLAB_CUDA_CHECK(cudaDeviceSynchronize());
    BUFFERLAB_CUDA_CHECK(cudaGetLastError());
  }

  // Every kernel op of the registry (op_registry.h), defined below the class.
  BUFFERLAB_BACKEND_OVERRIDES

 protected:
  Workspace do_allocate(const Layout& layout, uint64_t weights_bytes) override {
    return Workspace(layout, device_allocate(layout.arena_bytes()), device_allocate(weights_bytes),
                     weights_bytes, MemorySpace::device);
  }
  void fill_arena(const Workspace& ws, uint8_t byte) override {
    BUFFERLAB_CUDA_CHECK(cudaMemset(device(ws).arena_base(), byte, ws.layout().arena_bytes()));
  }

 private:
  // Made with the backend: the one fixed library block (docs/architecture.md "Design rules").
  std::unique_ptr<cuda::LibraryContext> ctx_ = std::make_unique<cuda::LibraryContext>();

  // A host workspace handed to the CUDA backend would be dereferenced by the device.
  static const Workspace& device(const Workspace& ws) {
    if (ws.where() != MemorySpace::device)
      throw Error("the cuda backend was given a host workspace");
    return ws;
  }
};

void CudaBackend::fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) {
  device(ws);
  const uint64_t rows = op.shape().rows;
  const uint64_t width = op.shape().width;
  const uint64_t n = (Size(rows) * width).value();
  if (n == 0) return;
  cuda::RmsNormLaunch a;
  a.rows = rows;
  a.width = width;
  a.eps = static_cast<float>(op.eps);
  a.add_residual = op.variant.add_residual;
  const auto bound = op.bind(ws);
  a.residual = bound.residual;
  a.input = bound.input;
  a.weight = bound.weight;
  a.output = bound.output;
  a.output_f32 = bound.output_f32;
  cuda::launch_fused_add_rmsnorm(a, /*stream=*/nullptr);
}

void CudaBackend::moe_router(const Workspace& ws, const MoeRouterOp& op) {
  cuda::moe_router(*ctx_, device(ws), op, kernel_mutant());
}

TopKDiagnostics CudaBackend::moe_topk(const Workspace& ws, const MoeTopKOp& op) {
  return cuda::moe_topk(*ctx_, device(ws), op, kernel_mutant());
}

void CudaBackend::moe_gather(const Workspace& ws, const MoeGatherOp& op) {
  cuda::moe_gather(*ctx_, device(ws), op);
}

void CudaBackend::moe_expert_gemm(const Workspace& ws, const MoeExpertGemmOp& op) {
  cuda::moe_expert_gemm(*ctx_, device(ws), op);
}

void CudaBackend::swiglu(const Workspace& ws, const SwigluOp& op) { cuda::swiglu(device(ws), op); }

void CudaBackend::moe_combine(const Workspace& ws, const MoeCombineOp& op) {
  cuda::moe_combine(*ctx_, device(ws), op);
}

void CudaBackend::gemm(const Workspace& ws, const GemmOp& op) { cuda::gemm(*ctx_, device(ws), op); }

void CudaBackend::lm_head(const Workspace& ws, const LmHeadOp& op) {
  cuda::lm_head(*ctx_, device(ws), op);
}

void CudaBackend::mhc_expand(const Workspace& ws, const MhcExpandOp& op) {
  cuda::mhc_expand(device(ws), op);
}

MhcDiagnostics CudaBackend::mhc_pre(const Workspace& ws, const MhcPreOp& op) {
  return cuda::mhc_pre(*ctx_, device(ws), op, kernel_mutant());
}

MhcDiagnostics CudaBackend::mhc_lowrank_split(const Workspace& ws, const MhcLowRankSplitOp& op) {
  return cuda::mhc_lowrank_split(*ctx_, device(ws), op);
}

MhcDiagnostics CudaBackend::mhc_lowrank_slab(const Workspace& ws, const MhcLowRankSlabOp& op) {
  return cuda::mhc_lowrank_slab(*ctx_, device(ws), op);
}

void CudaBackend::mhc_post(const Workspace& ws, const MhcPostOp& op) {
  cuda::mhc_post(device(ws), op, kernel_mutant());
}

MhcDiagnostics CudaBackend::mhc_head(const Workspace& ws, const MhcHeadOp& op) {
  return cuda::mhc_head(*ctx_, device(ws), op);
}

void CudaBackend::gdn_conv(const Workspace& ws, const GdnConvOp& op) {
  cuda::gdn_conv(device(ws), op);
}

void CudaBackend::gdn_gates(const Workspace& ws, const GdnGatesOp& op) {
  cuda::gdn_gates(device(ws), op);
}

void CudaBackend::gdn_chunk(const Workspace& ws, const GdnChunkOp& op) {
  cuda::gdn_chunk(*ctx_, device(ws), op, kernel_mutant());
}

void CudaBackend::gdn_recurrent(const Workspace& ws, const GdnRecurrentOp& op) {
  cuda::gdn_recurrent(device(ws), op);
}

void CudaBackend::gdn_gated_norm(const Workspace& ws, const GdnGatedNormOp& op) {
  cuda::gdn_gated_norm(device(ws), op);
}

void CudaBackend::mamba2_conv(const Workspace& ws, const Mamba2ConvOp& op) {
  cuda::mamba2_conv(device(ws), op);
}

void CudaBackend::mamba2_chunk(const Workspace& ws, const Mamba2ChunkOp& op) {
  cuda::mamba2_chunk(*ctx_, device(ws), op, kernel_mutant());
}

void CudaBackend::mamba2_recurrent(const Workspace& ws, const Mamba2RecurrentOp& op) {
  cuda::mamba2_recurrent(device(ws), op);
}

void CudaBackend::mamba2_gated_norm(const Workspace& ws, const Mamba2GatedNormOp& op) {
  cuda::mamba2_gated_norm(device(ws), op);
}

void CudaBackend::attn_stage(const Workspace& ws, const AttnStageOp& op) {
  cuda::attn_stage(device(ws), op, kernel_mutant());
}

void CudaBackend::attn_cache_write(const Workspace& ws, const AttnCacheWriteOp& op) {
  cuda::attn_cache_write(device(ws), op, kernel_mutant());
}

void CudaBackend::attn_prefill(const Workspace& ws, const AttnPrefillOp& op) {
  cuda::attn_prefill(device(ws), op, kernel_mutant());
}

void CudaBackend::attn_decode(const Workspace& ws, const AttnDecodeOp& op) {
  cuda::attn_decode(device(ws), op, kernel_mutant());
}

void CudaBackend::splitk_merge(const Workspace& ws, const SplitKMergeOp& op) {
  cuda::splitk_merge(device(ws), op, kernel_mutant());
}

void CudaBackend::attn_gate(const Workspace& ws, const AttnGateOp& op) {
  cuda::attn_gate(device(ws), op, kernel_mutant());
}

}  // namespace

// The backend itself, for this build's factory: make_cuda_backend below on a GPU, the
// simulated backend's wrapper (backends/cuda_sim) in the simulator.
std::unique_ptr<Backend> BUFFERLAB_CUDA_NS::make_kernel_backend() {
  return std::make_unique<CudaBackend>();
}

#if !defined(BUFFERLAB_CUDA_SIM)
std::unique_ptr<Backend> make_cuda_backend() {
  const std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) throw BackendUnavailable(reason);
  return cuda::make_kernel_backend();
}
#endif

}  // namespace bufferlab
