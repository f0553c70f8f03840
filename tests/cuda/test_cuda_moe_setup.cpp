// CudaBackend's MoE routing / FFN ops and BF16 GEMM kinds allocate nothing inside execute()
// (docs/architecture.md): on a small config (h = 64, E = 8 routed + 2 zero experts, top_k = 3,
// I = 32, 5 rows), device free memory is identical before and after running every op once more
// after a warm-up. A device-only test (it calls cudaMemGetInfo); the ops' numerics are judged per
// backend in tests/kernels/moe_*_kernel_tests.cpp. Without a usable GPU it is SKIPPED.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "device_memory.h"
#include "test_fixtures.h"

namespace bufferlab {
namespace {

constexpr uint64_t kRows = 5;

ModelConfig moe_config() {
  ModelConfig c = testing::small_moe_config();
  c.vocab_size = 100;
  c.routed_scaling_factor = 1.5;
  c.norm_topk_prob = true;
  return c;
}

class CudaMoe : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      gpu_ = make_backend("cuda");
    } catch (const BackendUnavailable& e) {
      GTEST_SKIP() << e.what();
    }
    c_ = moe_config();
    build_ops();
    ws_ = gpu_->allocate(layout_, pool_bytes_);
    gpu_->poison(ws_);
  }

  // Gives a weight-pool tensor its own 256-byte aligned place.
  void place(TensorRef& t) {
    t.offset = pool_bytes_;
    pool_bytes_ += (t.bytes() + 255) / 256 * 256;
  }
  void hold(const std::vector<Access>& accesses) {
    for (const Access& a : accesses) {
      if (a.tensor.space != Space::arena) continue;
      uint64_t& bytes = sizes_.bytes(a.tensor.buffer);
      bytes = std::max(bytes, a.tensor.offset + a.tensor.bytes());
    }
  }

  void build_ops() {
    const uint64_t h = c_.hidden_size, k = c_.num_experts_per_tok, I = c_.moe_intermediate_size;
    router_ = MoeRouterOp::make(c_, kRows, RouterPrecision::bf16);
    router_gate_ = MoeRouterOp::make(c_, kRows, RouterPrecision::fp32_gate);
    router_f32_ = MoeRouterOp::make(c_, kRows, RouterPrecision::fp32_routing);
    topk_ = MoeTopKOp::make(c_, kRows, /*logits_f32=*/false, /*hash=*/false);
    topk_f32_ = MoeTopKOp::make(c_, kRows, /*logits_f32=*/true, /*hash=*/false);
    topk_hash_ = MoeTopKOp::make(c_, kRows, /*logits_f32=*/false, /*hash=*/true);
    gather_ = MoeGatherOp::make(c_, kRows);
    gate_ = MoeExpertGemmOp::make(c_, kRows, ExpertProj::gate);
    up_ = MoeExpertGemmOp::make(c_, kRows, ExpertProj::up);
    down_ = MoeExpertGemmOp::make(c_, kRows, ExpertProj::down);
    act_ = SwigluOp::make(kRows, k * I, 0.75, "expert_gate", "expert_up", "expert_act");
    combine_ = MoeCombineOp::make(c_, kRows, /*hash=*/false);
    const TensorRef x = arena_tensor(BufferId::norm_output, 0, {kRows, h}, DType::bf16);
    const TensorRef out = arena_tensor(BufferId::moe_output, 0, {kRows, kGemmN}, DType::bf16);
    const auto make_gemm = [&](const char* kind) {
      std::vector<Access> in = {{x, AccessKind::read, "norm"}};
      if (std::string(kind) != "bf16") in.push_back({out, AccessKind::read, "out"});
      return GemmOp::make("dense", kind, in, kRows, kRows, h, kGemmN, BufferId::moe_output, 0,
                          DType::bf16, "out");
    };
    gemm_store_ = make_gemm("bf16");
    gemm_swiglu_ = make_gemm("bf16+swiglu-epilogue");
    gemm_acc_ = make_gemm("bf16+accumulate");
    head_ = LmHeadOp::make(kRows, 3, h, c_.vocab_size, "decode", LmHeadRows{1, 2, 2});

    // One weight per role; the three routers share Wg, the three top-k ops the bias/table.
    place(router_.weight);
    router_gate_.weight = router_f32_.weight = router_.weight;
    place(topk_.bias);
    place(topk_hash_.tid2eid);
    topk_f32_.bias = topk_hash_.bias = topk_.bias;
    topk_.tid2eid = topk_f32_.tid2eid = topk_hash_.tid2eid;
    place(gate_.weight);
    place(up_.weight);
    place(down_.weight);
    place(gemm_store_.weight);
    gemm_swiglu_.weight = gemm_acc_.weight = gemm_store_.weight;
    place(head_.table);

    for (const auto* op : {&router_, &router_gate_, &router_f32_}) hold(op->accesses());
    for (const auto* op : {&topk_, &topk_f32_, &topk_hash_}) hold(op->accesses());
    hold(gather_.accesses());
    for (const auto* op : {&gate_, &up_, &down_}) hold(op->accesses());
    hold(act_.accesses());
    hold(combine_.accesses());
    for (const auto* op : {&gemm_store_, &gemm_swiglu_, &gemm_acc_}) hold(op->accesses());
    hold(head_.accesses());
    layout_ = Layout::build(sizes_);
  }

  template <typename T>
  void up(const TensorRef& t, const std::vector<T>& v) {
    ASSERT_EQ(v.size() * sizeof(T), t.bytes()) << t.to_string();
    gpu_->upload(ws_, t, v.data());
  }
  // ids [rows, top_k] with zero experts (8, 9) and repeated experts, weights in (0, 1].
  std::vector<uint32_t> sample_ids() const { return {3, 0, 8, 3, 7, 1, 0, 9, 3, 5, 2, 7, 9, 8, 1}; }

  static constexpr uint64_t kGemmN = 48;
  std::unique_ptr<Backend> gpu_;
  ModelConfig c_;
  BufferSizes sizes_;
  Layout layout_;
  uint64_t pool_bytes_ = 0;
  Workspace ws_;
  MoeRouterOp router_, router_gate_, router_f32_;
  MoeTopKOp topk_, topk_f32_, topk_hash_;
  MoeGatherOp gather_;
  MoeExpertGemmOp gate_, up_, down_;
  SwigluOp act_;
  MoeCombineOp combine_;
  GemmOp gemm_store_, gemm_swiglu_, gemm_acc_;
  LmHeadOp head_;
};

// docs/architecture.md: backends allocate nothing inside execute(). After a warm-up pass over every
// op (module loading, cuBLAS's first-call setup), a second pass leaves device free memory exactly
// where it was.
TEST_F(CudaMoe, ExecuteAllocatesNothing) {
  const auto ids = sample_ids();
  const std::vector<uint32_t> tokens = {0, 1, 2, 3, 4};
  std::vector<int32_t> table(c_.vocab_size * c_.num_experts_per_tok, 1);
  gpu_->fill(ws_, topk_.bias, 0);
  up(topk_hash_.tid2eid, table);
  up(topk_hash_.token_ids, tokens);
  const auto run_all = [&] {
    for (const auto* op : {&router_, &router_gate_, &router_f32_}) gpu_->execute(ws_, *op);
    for (const auto* op : {&topk_, &topk_f32_, &topk_hash_}) gpu_->execute(ws_, *op);
    up(gather_.ids, ids);  // valid ids whatever the poisoned logits selected
    gpu_->execute(ws_, gather_);
    for (const auto* op : {&gate_, &up_}) gpu_->execute(ws_, *op);
    gpu_->execute(ws_, act_);
    gpu_->execute(ws_, down_);
    gpu_->execute(ws_, combine_);
    for (const auto* op : {&gemm_store_, &gemm_swiglu_, &gemm_acc_}) gpu_->execute(ws_, *op);
    gpu_->execute(ws_, head_);
    gpu_->synchronize();
  };
  testing::expect_no_device_allocation(run_all);
}

}  // namespace
}  // namespace bufferlab
