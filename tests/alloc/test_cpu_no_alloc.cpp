// "Backends allocate nothing inside execute()" (docs/architecture.md), proved for CpuBackend. This
// executable replaces the C allocation functions of the whole process (malloc, calloc,
// realloc, reallocarray, free, memalign, aligned_alloc, posix_memalign, valloc, pvalloc) with
// counting forwards to glibc's own (__libc_*), and every replaceable operator new / delete
// with forwards to those, so each heap allocation of any thread — ours, libstdc++'s,
// libgomp's, Eigen's — passes one counter, once. Every op family runs once through its oracle
// harness (poison, upload, execute: the warm-up that starts OpenMP's pool and any lazily set
// up state), once more through Backend::execute, then with the counter armed through
// Backend::execute and through the typed method: nothing may be allocated or freed. The
// descriptors are built before arming (an OpDescriptor made from an op copies its strings).
// Each family runs a small case (serial kernels) and one above the OpenMP thresholds.
//
// To find an allocation: BUFFERLAB_ALLOC_PROBE=backtrace prints the stack of every counted
// call to stderr (addresses: symbolize with addr2line -Cfe), =abort aborts at the first one
// (run under gdb for a symbolized stack).
#include <execinfo.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "bf16_gemm_op.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/attention.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/cpu/cpu_backend.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/mamba2_harness.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_inputs.h"
#include "bufferlab/oracle/moe_ffn.h"
#include "bufferlab/oracle/moe_ffn_harness.h"
#include "bufferlab/oracle/moe_ffn_inputs.h"
#include "bufferlab/oracle/pool_placement.h"
#include "bufferlab/oracle/rmsnorm_harness.h"
#include "bufferlab/oracle/rmsnorm_inputs.h"
#include "bufferlab/oracle/routing_harness.h"
#include "bufferlab/properties/routing_generators.h"
#include "gdn_mamba2_geometry.h"
#include "mhc_config.h"
#include "test_fixtures.h"

// ---- The counter ----------------------------------------------------------------------------

namespace {

enum ProbeMode : int { kCount, kBacktrace, kAbort };

std::atomic<bool> g_armed{false};
std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_frees{0};
std::atomic<int> g_mode{kCount};
thread_local bool t_reporting = false;  // the report's own allocations are not counted

void write_stderr(const char* s) noexcept {
  const ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void report(const char* what) noexcept {
  t_reporting = true;
  write_stderr("\n[alloc probe] ");
  write_stderr(what);
  write_stderr(" while armed, at:\n");
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  if (g_mode.load(std::memory_order_relaxed) == kAbort) std::abort();
  t_reporting = false;
}

void on_allocation(const char* what) noexcept {
  if (!g_armed.load(std::memory_order_relaxed) || t_reporting) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_mode.load(std::memory_order_relaxed) != kCount) report(what);
}

void on_free(const void* p) noexcept {
  if (p == nullptr || !g_armed.load(std::memory_order_relaxed) || t_reporting) return;
  g_frees.fetch_add(1, std::memory_order_relaxed);
  if (g_mode.load(std::memory_order_relaxed) != kCount) report("free");
}

size_t page_size() noexcept { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

// ---- The replacements: glibc's own allocator underneath, one count per call -----------------

extern "C" {
// glibc exports its allocator under these names (not declared in its headers).
void* __libc_malloc(size_t size);                   // NOLINT(bugprone-reserved-identifier)
void __libc_free(void* p);                          // NOLINT(bugprone-reserved-identifier)
void* __libc_calloc(size_t n, size_t size);         // NOLINT(bugprone-reserved-identifier)
void* __libc_realloc(void* p, size_t size);         // NOLINT(bugprone-reserved-identifier)
void* __libc_memalign(size_t alignment, size_t n);  // NOLINT(bugprone-reserved-identifier)

void* malloc(size_t size) noexcept {  // NOLINT
  on_allocation("malloc");
  return __libc_malloc(size);
}
void free(void* p) noexcept {  // NOLINT
  on_free(p);
  __libc_free(p);
}
void* calloc(size_t n, size_t size) noexcept {  // NOLINT
  on_allocation("calloc");
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) noexcept {  // NOLINT
  on_allocation("realloc");
  return __libc_realloc(p, size);
}
void* reallocarray(void* p, size_t n, size_t size) noexcept {  // NOLINT
  on_allocation("reallocarray");
  size_t bytes = 0;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_realloc(p, bytes);
}
void* memalign(size_t alignment, size_t size) noexcept {  // NOLINT
  on_allocation("memalign");
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) noexcept {  // NOLINT
  on_allocation("aligned_alloc");
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {  // NOLINT
  on_allocation("posix_memalign");
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t size) noexcept {  // NOLINT
  on_allocation("valloc");
  return __libc_memalign(page_size(), size);
}
void* pvalloc(size_t size) noexcept {  // NOLINT
  on_allocation("pvalloc");
  const size_t page = page_size();
  size_t rounded = 0;
  if (__builtin_add_overflow(size, page - 1, &rounded)) {
    errno = ENOMEM;
    return nullptr;
  }
  return __libc_memalign(page, rounded & ~(page - 1));
}
}  // extern "C"

namespace {

// operator new: the C functions above (counted there), the new-handler loop of the standard.
void* new_or_throw(size_t size, size_t alignment) {
  if (size == 0) size = 1;
  for (;;) {
    void* p = alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__ ? std::aligned_alloc(alignment, size)
                                                           : std::malloc(size);
    if (p != nullptr) return p;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* new_or_null(size_t size, size_t alignment) noexcept {
  try {
    return new_or_throw(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

constexpr size_t kDefaultAlign = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

}  // namespace

void* operator new(size_t size) { return new_or_throw(size, kDefaultAlign); }
void* operator new[](size_t size) { return new_or_throw(size, kDefaultAlign); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return new_or_null(size, kDefaultAlign);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return new_or_null(size, kDefaultAlign);
}
void* operator new(size_t size, std::align_val_t a) {
  return new_or_throw(size, static_cast<size_t>(a));
}
void* operator new[](size_t size, std::align_val_t a) {
  return new_or_throw(size, static_cast<size_t>(a));
}
void* operator new(size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_or_null(size, static_cast<size_t>(a));
}
void* operator new[](size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_or_null(size, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

// ---- The tests ------------------------------------------------------------------------------

namespace bufferlab {
namespace {

struct Counts {
  uint64_t allocations = 0, frees = 0;
};

// Counts the allocation calls of every thread while `f` runs; disarms even when it throws.
template <class F>
Counts counted(F&& f) {
  struct Disarm {
    ~Disarm() { g_armed.store(false); }
  };
  g_allocations.store(0);
  g_frees.store(0);
  {
    const Disarm disarm;
    g_armed.store(true);
    f();
  }
  return {g_allocations.load(), g_frees.load()};
}

// BUFFERLAB_ALLOC_PROBE=backtrace|abort, read once; backtrace() is warmed up here (its first
// call loads libgcc_s, allocating) so a report does not disturb what it reports.
class ProbeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* mode = std::getenv("BUFFERLAB_ALLOC_PROBE");
    if (mode == nullptr) return;
    void* frames[4];
    (void)backtrace(frames, 4);
    if (std::strcmp(mode, "backtrace") == 0) g_mode.store(kBacktrace);
    if (std::strcmp(mode, "abort") == 0) g_mode.store(kAbort);
  }
};
const ::testing::Environment* const kProbeEnvironment =
    ::testing::AddGlobalTestEnvironment(new ProbeEnvironment);

std::string params_of(const OpDescriptor& op) {
  return std::visit([](const auto& d) { return d.params(); }, op);
}

// The typed Backend method of a descriptor, called directly (not through execute()).
void call_typed(Backend& b, const Workspace& ws, const OpDescriptor& op) {
  std::visit(
      [&](const auto& d) {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, FusedAddRmsNormOp>) b.fused_add_rmsnorm(ws, d);
        if constexpr (std::is_same_v<T, MoeRouterOp>) b.moe_router(ws, d);
        if constexpr (std::is_same_v<T, MoeTopKOp>) (void)b.moe_topk(ws, d);
        if constexpr (std::is_same_v<T, MoeGatherOp>) b.moe_gather(ws, d);
        if constexpr (std::is_same_v<T, MoeExpertGemmOp>) b.moe_expert_gemm(ws, d);
        if constexpr (std::is_same_v<T, SwigluOp>) b.swiglu(ws, d);
        if constexpr (std::is_same_v<T, MoeCombineOp>) b.moe_combine(ws, d);
        if constexpr (std::is_same_v<T, GemmOp>) b.gemm(ws, d);
        if constexpr (std::is_same_v<T, LmHeadOp>) b.lm_head(ws, d);
        if constexpr (std::is_same_v<T, MhcExpandOp>) b.mhc_expand(ws, d);
        if constexpr (std::is_same_v<T, MhcPreOp>) (void)b.mhc_pre(ws, d);
        if constexpr (std::is_same_v<T, MhcLowRankSplitOp>) (void)b.mhc_lowrank_split(ws, d);
        if constexpr (std::is_same_v<T, MhcLowRankSlabOp>) (void)b.mhc_lowrank_slab(ws, d);
        if constexpr (std::is_same_v<T, MhcPostOp>) b.mhc_post(ws, d);
        if constexpr (std::is_same_v<T, MhcHeadOp>) (void)b.mhc_head(ws, d);
        if constexpr (std::is_same_v<T, GdnConvOp>) b.gdn_conv(ws, d);
        if constexpr (std::is_same_v<T, GdnGatesOp>) b.gdn_gates(ws, d);
        if constexpr (std::is_same_v<T, GdnChunkOp>) b.gdn_chunk(ws, d);
        if constexpr (std::is_same_v<T, GdnRecurrentOp>) b.gdn_recurrent(ws, d);
        if constexpr (std::is_same_v<T, GdnGatedNormOp>) b.gdn_gated_norm(ws, d);
        if constexpr (std::is_same_v<T, Mamba2ConvOp>) b.mamba2_conv(ws, d);
        if constexpr (std::is_same_v<T, Mamba2ChunkOp>) b.mamba2_chunk(ws, d);
        if constexpr (std::is_same_v<T, Mamba2RecurrentOp>) b.mamba2_recurrent(ws, d);
        if constexpr (std::is_same_v<T, Mamba2GatedNormOp>) b.mamba2_gated_norm(ws, d);
        if constexpr (std::is_same_v<T, AttnStageOp>) b.attn_stage(ws, d);
        if constexpr (std::is_same_v<T, AttnCacheWriteOp>) b.attn_cache_write(ws, d);
        if constexpr (std::is_same_v<T, AttnPrefillOp>) b.attn_prefill(ws, d);
        if constexpr (std::is_same_v<T, AttnDecodeOp>) b.attn_decode(ws, d);
        if constexpr (std::is_same_v<T, SplitKMergeOp>) b.splitk_merge(ws, d);
        if constexpr (std::is_same_v<T, AttnGateOp>) b.attn_gate(ws, d);
      },
      op);
}

// The op has run once through its harness; once more unarmed, then armed through execute()
// and through the typed method: no allocation, no free.
void expect_no_allocation(Backend& backend, const Workspace& ws, const OpDescriptor& op) {
  const std::string params = params_of(op);
  backend.execute(ws, op);
  backend.synchronize();
  const Counts via_execute = counted([&] {
    backend.execute(ws, op);
    backend.synchronize();
  });
  EXPECT_EQ(via_execute.allocations, 0u) << "execute(" << params << ") allocated";
  EXPECT_EQ(via_execute.frees, 0u) << "execute(" << params << ") freed";
  const Counts via_method = counted([&] {
    call_typed(backend, ws, op);
    backend.synchronize();
  });
  EXPECT_EQ(via_method.allocations, 0u) << "the typed method of " << params << " allocated";
  EXPECT_EQ(via_method.frees, 0u) << "the typed method of " << params << " freed";
}

// ---- The counter counts (so the tests below cannot pass vacuously) ----

void* volatile g_sink = nullptr;  // keeps the compiler from eliding an allocation

TEST(AllocProbe, CountsEveryAllocationFunctionWhileArmedOnly) {
  const Counts c = counted([] {
    g_sink = std::malloc(24);
    std::free(g_sink);
    g_sink = std::calloc(3, 8);
    g_sink = std::realloc(g_sink, 4096);
    std::free(g_sink);
    g_sink = std::aligned_alloc(64, 128);
    std::free(g_sink);
    g_sink = memalign(128, 256);
    std::free(g_sink);
    void* p = nullptr;
    if (posix_memalign(&p, 256, 512) == 0) g_sink = p;
    std::free(g_sink);
    g_sink = valloc(100);
    std::free(g_sink);
    g_sink = pvalloc(100);
    std::free(g_sink);
  });
  EXPECT_EQ(c.allocations, 8u);
  EXPECT_EQ(c.frees, 7u);

  const Counts cpp = counted([] {
    g_sink = new int(7);
    delete static_cast<int*>(g_sink);
    g_sink = new double[9];
    delete[] static_cast<double*>(g_sink);
    g_sink = new (std::nothrow) char[33];
    delete[] static_cast<char*>(g_sink);
    struct alignas(256) Wide {
      char bytes[256];
    };
    g_sink = new Wide;
    delete static_cast<Wide*>(g_sink);
    const std::vector<float> v(1000, 1.0f);
    g_sink = const_cast<float*>(v.data());
    const std::string s(100, 'x');  // past the small-string buffer
    g_sink = const_cast<char*>(s.data());
  });
  EXPECT_EQ(cpp.allocations, 6u);
  EXPECT_EQ(cpp.frees, 6u);

  g_sink = std::malloc(24);  // unarmed: not counted
  std::free(g_sink);
  EXPECT_EQ(counted([] {}).allocations, 0u);
}

TEST(AllocProbe, CountsAllocationsOfOtherThreads) {
  std::atomic<int> stage{0};
  std::thread worker([&] {
    while (stage.load() != 1) std::this_thread::yield();
    g_sink = std::malloc(40);
    std::free(g_sink);
    stage.store(2);
    while (stage.load() != 3) std::this_thread::yield();  // std::thread frees its state on exit
  });
  const Counts c = counted([&] {
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
  });
  stage.store(3);
  worker.join();
  EXPECT_EQ(c.allocations, 1u);
  EXPECT_EQ(c.frees, 1u);
}

// The backend's own code is interposed too: allocating a workspace and an op's error path
// (its message) are counted.
TEST(AllocProbe, SeesTheBackendsAllocations) {
  const auto backend = make_cpu_backend();
  const FusedAddRmsNormOp op = testing::rmsnorm_op(3, 33, {true, false, false});
  Workspace ws;
  const Counts alloc = counted(
      [&] { ws = backend->allocate(oracle::footprint_layout(op), op.weight_pool_bytes()); });
  EXPECT_GT(alloc.allocations, 0u);

  ModelConfig c;
  c.hidden_size = 16;
  c.hc_mult = 2;
  c.hc_sinkhorn_iters = 20;
  MhcPreOp pre = MhcPreOp::make(c, 2);
  const uint64_t pool = oracle::place_mhc_weights(pre);
  const Workspace hc_ws = oracle::allocate_mhc_footprint(*backend, pre, pool);
  pre.dims.iters = 0;  // refused with an Error that names the op
  const OpDescriptor bad = pre;
  const Counts thrown = counted([&] { EXPECT_THROW(backend->execute(hc_ws, bad), Error); });
  EXPECT_GT(thrown.allocations, 0u);
}

// ---- fused add + RMSNorm ----

TEST(CpuNoAlloc, FusedAddRmsNorm) {
  const auto backend = make_cpu_backend();
  const RmsNormVariant variants[] = {
      {true, false, false}, {true, true, false}, {true, false, true}, {false, false, false}};
  // 3 × 33: serial; 64 × 1024 = 2^16 elements: above the OpenMP threshold (2^15).
  for (const auto& [rows, width] : std::vector<std::pair<uint64_t, uint64_t>>{{3, 33}, {64, 1024}})
    for (const RmsNormVariant& v : variants) {
      const FusedAddRmsNormOp op = testing::rmsnorm_op(rows, width, v);
      const Workspace ws = backend->allocate(oracle::footprint_layout(op), op.weight_pool_bytes());
      oracle::run_fused_add_rmsnorm(*backend, ws, op, oracle::generate_rmsnorm_inputs(op, 11));
      expect_no_allocation(*backend, ws, op);
    }
}

// ---- MoE routing: the router on every precision path, top-k on every scoring and hash ----

struct RoutingCaseSpec {
  const char* scoring;
  bool bias;
  RouterPrecision precision;
  bool hash;
};

TEST(CpuNoAlloc, MoeRouterAndTopK) {
  const auto backend = make_cpu_backend();
  const RoutingCaseSpec specs[] = {
      {"softmax", false, RouterPrecision::bf16, false},
      {"softmax", false, RouterPrecision::fp32_gate, false},
      {"softmax", false, RouterPrecision::fp32_routing, false},
      {"sigmoid", true, RouterPrecision::fp32_gate, false},
      {"sqrtsoftplus", true, RouterPrecision::bf16, true},
  };
  // 5 rows × 10 experts: serial top-k; 128 × 258 logits: above its threshold (2^14).
  struct Dims {
    uint64_t rows, hidden, experts, zero, top_k;
  };
  for (const Dims d : {Dims{5, 64, 8, 2, 3}, Dims{128, 256, 256, 2, 8}})
    for (const RoutingCaseSpec& s : specs) {
      gen::RoutingCase c;
      c.config.hidden_size = d.hidden;
      c.config.vocab_size = 100;
      c.config.num_experts = d.experts;
      c.config.zero_expert_num = s.hash ? 0 : d.zero;
      c.config.num_experts_per_tok = d.top_k;
      c.config.scoring_func = s.scoring;
      c.config.use_routing_bias = s.bias;
      c.config.norm_topk_prob = true;
      c.config.routed_scaling_factor = 2.5;
      c.rows = d.rows;
      c.precision = s.precision;
      c.hash = s.hash;
      c.seed = 21 + d.rows;
      const gen::RoutingTensors t = gen::routing_tensors(c);
      const oracle::RoutingOps ops =
          oracle::make_routing_ops(c.config, c.rows, c.precision, c.hash);
      const Workspace ws = backend->allocate(oracle::routing_footprint_layout(ops), ops.pool_bytes);
      oracle::run_routing_chain(*backend, ws, ops, {t.x_bf16, t.x_f32, t.weight},
                                {t.bias, t.token_ids, t.tid2eid});
      expect_no_allocation(*backend, ws, ops.router);
      expect_no_allocation(*backend, ws, ops.topk);
    }
}

// ---- The routed-expert chain: gather, gate / up / down GEMMs, SwiGLU, combine ----

TEST(CpuNoAlloc, MoeExpertChain) {
  const auto backend = make_cpu_backend();
  struct Case {
    uint64_t rows, hidden, experts, zero, top_k, intermediate, latent;
    double limit;
    bool hash;
  };
  // Small: serial copies / SwiGLU / combine; the large ones pass 2^15 elements in each, and
  // the latent one combines in place of its input.
  const Case cases[] = {{5, 64, 8, 2, 3, 32, 0, 0.0, false},
                        {128, 256, 16, 2, 4, 128, 0, 7.0, false},
                        {128, 256, 16, 0, 4, 128, 0, 0.0, true},
                        {40, 256, 8, 1, 2, 96, 128, 0.0, false}};
  for (const Case& k : cases) {
    ModelConfig c;
    c.hidden_size = k.hidden;
    c.vocab_size = 100;
    c.num_experts = k.experts;
    c.zero_expert_num = k.zero;
    c.num_experts_per_tok = k.top_k;
    c.moe_intermediate_size = k.intermediate;
    c.moe_latent_size = k.latent;
    c.swiglu_limit = k.limit;
    const auto chain = oracle::ExpertChain::make(c, k.rows, k.hash);
    const oracle::RoutingProfile routing{k.experts, chain.zero_experts, 0.2, 0.3, k.hash};
    const auto in = oracle::generate_expert_chain_inputs(chain, 31, routing, {1.0, 0});
    const Workspace ws = oracle::allocate_footprint(*backend, chain);
    oracle::run_expert_chain(*backend, ws, chain, in);
    for (const OpDescriptor& op : std::vector<OpDescriptor>{chain.gather, chain.gate, chain.up,
                                                            chain.act, chain.down, chain.combine})
      expect_no_allocation(*backend, ws, op);
  }
}

// ---- GemmOp BF16 kinds and the LM head ----

GemmOp bf16_gemm(GemmEpilogue e, uint64_t rows, uint64_t K, uint64_t N) {
  const BufferId out = e == GemmEpilogue::store ? BufferId::expert_gate_out : BufferId::moe_output;
  return testing::bf16_gemm_op(e, rows, K, N, out, "dense", "out");
}

TEST(CpuNoAlloc, GemmBf16Kinds) {
  const auto backend = make_cpu_backend();
  struct Dims {
    uint64_t rows, K, N;
  };
  // One tile, and several tiles with partial edges in M, N and K.
  for (const Dims d : {Dims{5, 64, 48}, Dims{130, 300, 260}})
    for (const GemmEpilogue e :
         {GemmEpilogue::store, GemmEpilogue::swiglu, GemmEpilogue::accumulate}) {
      const GemmOp op = bf16_gemm(e, d.rows, d.K, d.N);
      const oracle::GemmInputs in{
          oracle::seeded_bf16(d.rows * d.K, 41, {1.0, 0}),
          oracle::seeded_bf16(d.N * d.K, 42, {1.0 / std::sqrt(static_cast<double>(d.K)), 0}),
          e == GemmEpilogue::store ? std::vector<uint16_t>{}
                                   : oracle::seeded_bf16(d.rows * d.N, 43, {1.0, 0})};
      const Workspace ws = oracle::allocate_footprint(*backend, op);
      oracle::run_gemm(*backend, ws, op, in);
      expect_no_allocation(*backend, ws, op);
    }
}

TEST(CpuNoAlloc, LmHead) {
  const auto backend = make_cpu_backend();
  const uint64_t h = 200, vocab = 300;
  const LmHeadOp ops[] = {
      LmHeadOp::make(4, 4, h, vocab, "decode", {4, 0, 0}),
      LmHeadOp::make(70, 1, h, vocab, "prefill", {0, 69, 0}),
      LmHeadOp::make(3 + 20, 4, h, vocab, "mixed", {3, 22, 0}),
      LmHeadOp::make(4 * 30, 4, h, vocab, "codispatch", {0, 29, 30}),
      LmHeadOp::make(100, 100, h, vocab, "verify", {100, 0, 0}),
  };
  for (const LmHeadOp& op : ops) {
    const oracle::LmHeadInputs in{oracle::seeded_bf16(op.shape().rows * h, 51, {1.0, 0}),
                                  oracle::seeded_bf16(vocab * h, 52, {0.07, 0})};
    const Workspace ws = oracle::allocate_footprint(*backend, op);
    oracle::run_lm_head(*backend, ws, op, in);
    expect_no_allocation(*backend, ws, op);
  }
}

// ---- mHC: expand, pre (Sinkhorn), post (both forms), head, the low-rank stages ----

using testing::mhc_config;

struct MhcDims {
  uint64_t rows, hc, h;
};
// 3 × 2 × 32: serial; 64 × 4 × 256 = 2^16 stream values: above the OpenMP threshold (2^15).
constexpr MhcDims kMhcSizes[] = {{3, 2, 32}, {64, 4, 256}};

TEST(CpuNoAlloc, HcExpandPrePostHead) {
  const auto backend = make_cpu_backend();
  for (const MhcDims d : kMhcSizes)
    for (const uint64_t lowrank : {uint64_t{0}, uint64_t{8}}) {
      const ModelConfig c = mhc_config(d.hc, d.h, lowrank);
      if (lowrank == 0) {
        const MhcExpandOp expand = MhcExpandOp::make(c, d.rows);
        const Workspace ws = oracle::allocate_mhc_footprint(*backend, expand, 0);
        oracle::run_mhc_expand(*backend, ws, expand, oracle::generate_mhc_expand_input(expand, 61));
        expect_no_allocation(*backend, ws, expand);

        MhcPreOp pre = MhcPreOp::make(c, d.rows);
        const uint64_t pool = oracle::place_mhc_weights(pre);
        const Workspace pre_ws = oracle::allocate_mhc_footprint(*backend, pre, pool);
        oracle::run_mhc_pre(*backend, pre_ws, pre, oracle::generate_mhc_pre_inputs(pre, 62));
        expect_no_allocation(*backend, pre_ws, pre);
      }

      const MhcPostOp post = MhcPostOp::make(c, d.rows);  // in place; low-rank form when r > 0
      const Workspace post_ws = oracle::allocate_mhc_footprint(*backend, post, 0);
      oracle::run_mhc_post(*backend, post_ws, post, oracle::generate_mhc_post_inputs(post, 63));
      expect_no_allocation(*backend, post_ws, post);

      MhcHeadOp head = MhcHeadOp::make(c, d.rows);
      const uint64_t head_pool = oracle::place_mhc_weights(head);
      const Workspace head_ws = oracle::allocate_mhc_footprint(*backend, head, head_pool);
      oracle::run_mhc_head(*backend, head_ws, head, oracle::generate_mhc_head_inputs(head, 64));
      expect_no_allocation(*backend, head_ws, head);
    }
}

TEST(CpuNoAlloc, HcLowRankStages) {
  const auto backend = make_cpu_backend();
  struct Case {
    MhcDims d;
    uint64_t r;
    oracle::MhcLowRankPath path;
  };
  // Split path (rows ≤ 64) small and large; slab path (GEMMs) past 64 rows and small.
  const Case cases[] = {{{3, 2, 32}, 4, oracle::MhcLowRankPath::split},
                        {{64, 4, 256}, 16, oracle::MhcLowRankPath::split},
                        {{3, 2, 32}, 4, oracle::MhcLowRankPath::slab},
                        {{80, 4, 256}, 16, oracle::MhcLowRankPath::slab}};
  for (const Case& k : cases) {
    const ModelConfig c = mhc_config(k.d.hc, k.d.h, k.r);
    const oracle::MhcLowRankPlan plan = oracle::plan_mhc_lowrank(c, k.d.rows, k.path);
    const oracle::MhcLowRankDims dims{k.d.rows, k.d.hc, k.d.h, k.r, c.rms_norm_eps};
    const Workspace ws = oracle::allocate_mhc_footprint(*backend, plan);
    oracle::run_mhc_lowrank(*backend, ws, plan, oracle::generate_mhc_lowrank_inputs(dims, 71));
    for (const MhcLowRankSplitOp& op : plan.split) expect_no_allocation(*backend, ws, op);
    for (const MhcLowRankSlabOp& op : plan.slab) expect_no_allocation(*backend, ws, op);
  }
}

// ---- Gated DeltaNet and Mamba-2: conv, gates, every chunked stage, the recurrences, norms ----

template <class Op>
void expect_ops_allocate_nothing(Backend& backend, const Workspace& ws,
                                 const std::vector<Op>& ops) {
  for (const Op& op : ops) expect_no_allocation(backend, ws, op);
}

TEST(CpuNoAlloc, GdnChunkedAndRecurrent) {
  const auto backend = make_cpu_backend();
  struct Case {
    uint64_t nk, kd, nv, vd, sequences, L;
    oracle::GdnPath path;
  };
  // One short sequence (serial) and co-dispatched streams with a partial chunk (parallel over
  // regions); the recurrence at a small and at the chunked head size.
  const Case cases[] = {{1, 128, 1, 128, 1, 5, oracle::GdnPath::chunked},
                        {2, 128, 4, 128, 3, 65, oracle::GdnPath::chunked},
                        {1, 32, 2, 48, 2, 7, oracle::GdnPath::recurrent},
                        {2, 128, 4, 128, 1, 70, oracle::GdnPath::recurrent}};
  for (const Case& k : cases) {
    const auto dims =
        oracle::GdnDims::of(testing::gdn_config(k.nk, k.kd, k.nv, k.vd), k.sequences, k.L);
    const oracle::GdnPlan plan = oracle::plan_gdn(dims, k.path);
    const Workspace ws = oracle::allocate_gdn_footprint(*backend, plan);
    oracle::run_gdn(*backend, ws, plan, oracle::generate_gdn_inputs(dims, 81));
    expect_no_allocation(*backend, ws, plan.conv);
    expect_no_allocation(*backend, ws, plan.gates);
    if (k.path == oracle::GdnPath::chunked)
      expect_ops_allocate_nothing(*backend, ws, plan.chunk);
    else
      expect_no_allocation(*backend, ws, plan.recurrent);
    expect_no_allocation(*backend, ws, plan.norm);
  }
}

TEST(CpuNoAlloc, SsdChunkedAndRecurrent) {
  const auto backend = make_cpu_backend();
  struct Case {
    uint64_t H, P, N, groups, sequences, L;
    oracle::Mamba2Path path;
  };
  const Case cases[] = {{2, 8, 16, 1, 1, 5, oracle::Mamba2Path::chunked},
                        {8, 32, 64, 2, 2, 65, oracle::Mamba2Path::chunked},
                        {2, 8, 16, 1, 3, 4, oracle::Mamba2Path::recurrent},
                        {8, 32, 64, 2, 1, 70, oracle::Mamba2Path::recurrent}};
  for (const Case& k : cases) {
    const auto dims =
        oracle::Mamba2Dims::of(testing::mamba2_config(k.H, k.P, k.N, k.groups), k.sequences, k.L);
    const oracle::Mamba2Plan plan = oracle::plan_mamba2(dims, k.path);
    const Workspace ws = oracle::allocate_mamba2_footprint(*backend, plan);
    oracle::run_mamba2(*backend, ws, plan, oracle::generate_mamba2_inputs(dims, 82));
    expect_no_allocation(*backend, ws, plan.conv);
    if (k.path == oracle::Mamba2Path::chunked)
      expect_ops_allocate_nothing(*backend, ws, plan.chunk);
    else
      expect_no_allocation(*backend, ws, plan.recurrent);
    expect_no_allocation(*backend, ws, plan.norm);
  }
}

// ---- Attention: staging, cache write, prefill and decode cores, split-K merge, gate ---------

// A gated GQA config with qk_norm, partial rotary and sinks: every branch of the kernels.
ModelConfig attention_alloc_config(uint64_t nq, uint64_t nkv, uint64_t hd) {
  ModelConfig c;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.vocab_size = 100;
  c.num_hidden_layers = 2;
  c.num_attention_heads = nq;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.partial_rotary_factor = 0.5;
  c.qk_norm = true;
  c.attn_gated = true;
  c.attn_sinks = true;
  c.sliding_window = 48;
  return c;
}

// The attention ops on one hand-built footprint (no attention harness in the oracle yet): the
// weight-pool operands and metadata placed once and shared, every slot and block entry inside
// the cache, the cache zeroed; each op runs once to warm up, then expect_no_allocation.
TEST(CpuNoAlloc, AttentionStagesCoresMergeGate) {
  const auto backend = make_cpu_backend();
  struct Case {
    uint64_t nq, nkv, hd, streams, L, ctx, decode_rows, live, splits;
  };
  // Serial (under kParallelMinWork) and above it on every op.
  const Case cases[] = {{2, 1, 16, 1, 3, 2, 2, 1, 2}, {8, 2, 64, 3, 40, 70, 16, 12, 4}};
  for (const Case& k : cases) {
    const ModelConfig c = attention_alloc_config(k.nq, k.nkv, k.hd);
    const AttnGeometry g = AttnGeometry::of(c);
    const uint64_t t = k.streams * k.L, m = (t + 15) / 16 * 16, R = k.decode_rows;
    const KvCacheGeometry cache{16, 64, 8};  // 8 blocks of 16 per sequence, 64 blocks
    AttnWeights w = AttnWeights::make(g, cache);
    w.v_cache = pool_tensor(w.k_cache.shape, DType::bf16);
    AttnMetaRefs pm, dm;  // prefill and decode metadata
    pm.positions = pool_tensor({1, t}, DType::u32);
    pm.pos_stride = t;
    pm.slots = pool_tensor({t}, DType::i64);
    pm.lens = pool_tensor({k.streams}, DType::i32);
    pm.block_table = pool_tensor({k.streams, cache.max_blocks}, DType::i32);
    dm.positions = pool_tensor({1, R}, DType::u32);
    dm.pos_stride = R;
    dm.slots = pool_tensor({R}, DType::i64);
    dm.lens = pool_tensor({R}, DType::i32);
    dm.block_table = pool_tensor({R, cache.max_blocks}, DType::i32);
    const uint64_t pool = oracle::place_in_pool(
        {&w.rope, &w.q_norm, &w.k_norm, &w.sinks, &w.k_cache, &w.v_cache, &pm.positions, &pm.slots,
         &pm.lens, &pm.block_table, &dm.positions, &dm.slots, &dm.lens, &dm.block_table});
    const auto with = [&](AttnWeights made) {
      const auto pick = [](const TensorRef& mine, const TensorRef& placed) {
        return mine.shape.empty() ? TensorRef{} : placed;
      };
      made.rope = pick(made.rope, w.rope);
      made.q_norm = pick(made.q_norm, w.q_norm);
      made.k_norm = pick(made.k_norm, w.k_norm);
      made.sinks = pick(made.sinks, w.sinks);
      made.k_cache = pick(made.k_cache, w.k_cache);
      made.v_cache = pick(made.v_cache, w.v_cache);
      return made;
    };
    using Part = AttnStageOp::Part;
    std::vector<OpDescriptor> ops;
    for (Part part : {Part::q_copy, Part::k_scratch, Part::v_scratch}) {
      AttnStageOp op =
          AttnStageOp::make(c, part, R, t, true, part == Part::v_scratch ? m : 0, {}, pm);
      op.weights = with(op.weights);
      ops.emplace_back(op);
    }
    AttnCacheWriteOp write =
        AttnCacheWriteOp::make(c, AttnCacheWriteOp::Source::scratch, 0, t, m, cache, {}, pm);
    write.weights = with(write.weights);
    ops.emplace_back(write);
    AttnPrefillOp prefill =
        AttnPrefillOp::make(c, true, {R, t, k.streams, 0, t}, m, cache, std::nullopt, {}, pm);
    prefill.weights = with(prefill.weights);
    ops.emplace_back(prefill);
    AttnCacheWriteOp dwrite =
        AttnCacheWriteOp::make(c, AttnCacheWriteOp::Source::qkv, 0, R, 0, cache, {}, dm);
    dwrite.weights = with(dwrite.weights);
    ops.emplace_back(dwrite);
    for (uint64_t splits : {uint64_t{1}, k.splits}) {
      AttnDecodeOp decode = AttnDecodeOp::make(c, false, R, k.live, splits, false, cache, {}, dm);
      decode.weights = with(decode.weights);
      ops.emplace_back(decode);
    }
    SplitKMergeOp merge = SplitKMergeOp::make(c, R, k.live, k.splits);
    merge.sinks = w.sinks;
    ops.emplace_back(merge);
    ops.emplace_back(AttnGateOp::make(c, R + t));
    BufferSizes sizes;
    for (const OpDescriptor& op : ops)
      for (const Access& a : std::visit([](const auto& d) { return d.accesses(); }, op)) {
        if (a.tensor.space != Space::arena || a.tensor.elements() == 0) continue;
        sizes.bytes(a.tensor.buffer) =
            std::max(sizes.bytes(a.tensor.buffer), a.tensor.offset + a.tensor.bytes());
      }
    const Workspace ws = backend->allocate(Layout::build(sizes), pool);
    backend->poison(ws);
    for (const TensorRef* r : {&w.rope, &w.q_norm, &w.k_norm, &w.sinks, &w.k_cache, &w.v_cache})
      backend->fill(ws, *r, 0);
    // Prefill: stream b's token i at position ctx + i, slot in the stream's blocks 8b…8b+7;
    // decode row r at position ctx + r % 8, in blocks 8(streams + r % 4)…; rows ≥ live padding.
    std::vector<uint32_t> ppos(t), dpos(R);
    std::vector<int64_t> pslots(t), dslots(R);
    std::vector<int32_t> plens(k.streams, int32_t(k.ctx)), dlens(R);
    std::vector<int32_t> ptable(k.streams * cache.max_blocks), dtable(R * cache.max_blocks);
    for (uint64_t i = 0; i < ptable.size(); ++i) ptable[i] = int32_t(i);
    for (uint64_t r = 0; r < R; ++r)
      for (uint64_t e = 0; e < cache.max_blocks; ++e)
        dtable[r * cache.max_blocks + e] = int32_t((k.streams + r % 4) * cache.max_blocks + e);
    for (uint64_t b = 0; b < k.streams; ++b)
      for (uint64_t i = 0; i < k.L; ++i) {
        ppos[b * k.L + i] = uint32_t(k.ctx + i);
        pslots[b * k.L + i] = int64_t(b * cache.max_blocks * cache.block_size + k.ctx + i);
      }
    for (uint64_t r = 0; r < R; ++r) {
      dpos[r] = uint32_t(k.ctx + r % 8);
      dlens[r] = int32_t(k.ctx + r % 8 + 1);
      dslots[r] = r < k.live ? dtable[r * cache.max_blocks] * int64_t(cache.block_size) +
                                   int64_t(k.ctx + r % 8)
                             : -1;
    }
    backend->upload(ws, pm.positions, ppos.data());
    backend->upload(ws, pm.slots, pslots.data());
    backend->upload(ws, pm.lens, plens.data());
    backend->upload(ws, pm.block_table, ptable.data());
    backend->upload(ws, dm.positions, dpos.data());
    backend->upload(ws, dm.slots, dslots.data());
    backend->upload(ws, dm.lens, dlens.data());
    backend->upload(ws, dm.block_table, dtable.data());
    for (const OpDescriptor& op : ops) backend->execute(ws, op);  // the warm-up
    backend->synchronize();
    for (const OpDescriptor& op : ops) expect_no_allocation(*backend, ws, op);
  }
}

}  // namespace
}  // namespace bufferlab
