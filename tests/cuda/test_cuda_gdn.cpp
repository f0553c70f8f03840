// CudaBackend's Gated DeltaNet ops (spec/numerics.md §5, core ops/gdn.h) against plain FP64
// loops written here from the op header's pins (no oracle, no CPU kernel needed).
//
// Suite CudaGdn (small shapes; every arena poisoned with NaN first, so an output a kernel
// fails to write fails its comparison):
//   conv:       output within 2γ_K·Σ|w·x| + 16u·|y| of silu(Σ w·x) (FP32 sum of K products,
//               accurate expf); the tails are exactly the last K−1 entries of [old tail |
//               inputs] (L = 1, 2 < K−1 shift old entries in), sequences 2;
//   gates:      β within 8u relative, α = exp(−arg) within (4 + 16·arg)·u relative (accurate
//               expf / log1pf: a few ulps in arg), softplus arguments of exactly 20 and above;
//   gated norm: BF16 within (1 + 2^-5)·2^-8·|y| (one rounding; FP32 noise far below 2^-13);
//   recurrence: output within (1 + 2^-5)·2^-8·|y| + 2^-10·max|y| of the FP64 recurrence,
//               the FP32 state within 2^-16·max|S| (kd, vd up to 256, a decode batch,
//               sequences 2, row0 > 0);
//   chunked:    each stage against FP64 loops fed the stage's STORED inputs (the W/U solve
//               from the stored gc, the state pass from the stored W, U, gc and carrying
//               through the stored uc, the output from the stored S, uc, gc): BF16 values
//               within (1 + 2^-5)·2^-8·|ref| + 2^-10·max|ref|, the FP32 state within
//               2^-16·max|S|, gc within (i + 3)·2^-23·Σ|log α|, rows past a partial chunk
//               exactly zero; L = 1, 64, 65, 130, streams 1 and 2, row0 > 0, GQA 2; the
//               three stages together within 2^-6·max of the FP64 recurrence; M-GDNCARRY
//               leaves a BF16-exact state that differs from the clean one;
//   errors:     kd ≠ 128 refused by the chunked stages, kd > 256 by the recurrence, nv not a
//               multiple of nk by both;
//   memory:     execute() of every GDN op allocates no device memory (cudaMemGetInfo).
// Suite CudaGdnReference (runs without a GPU): the FP64 chunked form used above equals the
// FP64 recurrence to 1e-9 relative — the references themselves follow numerics §5.
//
// Without a usable GPU every CudaGdn test is SKIPPED with cuda_unavailable_reason().
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/cuda/cuda_backend.h"
#include "bufferlab/oracle/pool_placement.h"

namespace bufferlab {
namespace {

using Bits = std::vector<uint16_t>;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

constexpr double kU = 0x1p-24;  // FP32 unit roundoff
// One BF16 rounding (unit roundoff 2^-8: 8 significant bits) of an FP32 value with up to
// ~1e-4 relative FP32 noise: |bf16(y') − y| ≤ 2^-8·|y'| + |y' − y|.
constexpr double kBf16Rel = 0x1p-8 * (1.0 + 0x1p-5);
// FP32 accumulation noise (dot products of 128, chunk chains) as a fraction of max|ref|, for
// values computed from BF16-stored operands; FP32 states carry no BF16 step: a tighter share.
constexpr double kAbsFrac = 0x1p-10;
constexpr double kStateFrac = 0x1p-16;
constexpr uint64_t kC = GdnChunkCarve::kChunk;
constexpr uint64_t kH = kGdnChunkedHeadDim;

double gamma(double n) { return n * kU / (1.0 - n * kU); }
double fl(uint16_t b) { return bf16_bits_to_f32(b); }

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n deterministic values in [lo, hi), on a grid of 2^16 steps.
Floats values(uint64_t n, uint64_t seed, double lo, double hi) {
  Floats v(n);
  for (uint64_t i = 0; i < n; ++i) {
    const double q = static_cast<double>(mix64(i * 0x100000001B3ull + seed) >> 48) / 65536.0;
    v[i] = static_cast<float>(lo + (hi - lo) * q);
  }
  return v;
}

Bits bf16_values(uint64_t n, uint64_t seed, double lo, double hi) {
  const Floats v = values(n, seed, lo, hi);
  Bits b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = f32_to_bf16_bits(v[i]);
  return b;
}

// Gates [rows, nv, 2]: β in [0.1, 0.9), α in [0.85, 1) (long memory: the chunk decays matter).
Floats gate_values(uint64_t rows, uint64_t nv, uint64_t seed) {
  const Floats beta = values(rows * nv, seed, 0.1, 0.9);
  const Floats alpha = values(rows * nv, seed + 1, 0.85, 1.0);
  Floats g(2 * rows * nv);
  for (uint64_t i = 0; i < rows * nv; ++i) {
    g[2 * i] = beta[i];
    g[2 * i + 1] = alpha[i];
  }
  return g;
}

GdnGeometry geometry(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd, uint64_t kernel = 4) {
  GdnGeometry g;
  g.nk = nk;
  g.kd = kd;
  g.nv = nv;
  g.vd = vd;
  g.kernel = kernel;
  g.conv_dim = 2 * nk * kd + nv * vd;
  g.value_dim = nv * vd;
  g.qkvz = 2 * nk * kd + 2 * nv * vd;
  return g;
}

double max_abs(const Doubles& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Counts the elements outside their tolerance (a NaN is outside any) and reports the first
// few when it goes out of scope.
class Tally {
 public:
  explicit Tally(std::string what) : what_(std::move(what)) {}
  Tally(const Tally&) = delete;
  Tally& operator=(const Tally&) = delete;
  ~Tally() { EXPECT_EQ(bad_, 0u) << what_ << " (" << checked_ << " checked)" << first_; }

  void near(double got, double ref, double tol, uint64_t at) {
    ++checked_;
    if (std::abs(got - ref) <= tol) return;
    note(at, "got " + fmt(got) + ", want " + fmt(ref) + " ± " + fmt(tol));
  }
  void zero_bits(uint32_t bits, uint64_t at) {
    ++checked_;
    if (bits != 0) note(at, "an unused row holds bits " + std::to_string(bits) + ", not zero");
  }

 private:
  void note(uint64_t at, const std::string& s) {
    if (bad_++ < 5) first_ += "\n  [" + std::to_string(at) + "] " + s;
  }
  std::string what_, first_;
  uint64_t bad_ = 0, checked_ = 0;
};

// A workspace on `backend` whose arena holds every arena tensor of the given accesses and a
// weight pool of `pool_bytes`, poisoned (NaN) so an unwritten output fails.
struct Rig {
  Backend* backend = nullptr;
  Workspace ws;

  Rig(Backend& b, const std::vector<std::vector<Access>>& ops, uint64_t pool_bytes) : backend(&b) {
    BufferSizes sizes;
    for (const auto& accesses : ops)
      for (const Access& a : accesses) {
        if (a.tensor.space != Space::arena) continue;
        uint64_t& bytes = sizes.bytes(a.tensor.buffer);
        bytes = std::max(bytes, a.tensor.offset + a.tensor.bytes());
      }
    ws = backend->allocate(Layout::build(sizes), pool_bytes);
    backend->poison(ws);
  }
  template <class T>
  void put(const TensorRef& t, const std::vector<T>& host) {
    ASSERT_EQ(host.size() * sizeof(T), t.bytes()) << t.to_string();
    backend->upload(ws, t, host.data());
  }
  template <class T>
  std::vector<T> get(const TensorRef& t) {
    std::vector<T> host(t.bytes() / sizeof(T));
    backend->synchronize();
    backend->download(ws, t, host.data());
    return host;
  }
};

class CudaGdn : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = cuda_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    gpu_ = make_cuda_backend();
  }

  std::unique_ptr<Backend> gpu_;
};

// ============================================================== FP64 references

// The q (times kd^-1/2) or k row of value head h at conv row `row`, L2-normalised in FP64.
Doubles head_row(const GdnGeometry& g, const Floats& conv, uint64_t row, uint64_t h, bool query) {
  const uint64_t kh = h / (g.nv / g.nk);
  const float* x = conv.data() + row * g.conv_dim + (query ? 0 : g.nk * g.kd) + kh * g.kd;
  double ss = 0.0;
  for (uint64_t i = 0; i < g.kd; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss + static_cast<double>(kGdnL2Eps));
  const double scale = query ? 1.0 / std::sqrt(static_cast<double>(g.kd)) : 1.0;
  Doubles out(g.kd);
  for (uint64_t i = 0; i < g.kd; ++i) out[i] = x[i] * inv * scale;
  return out;
}

const float* value_row(const GdnGeometry& g, const Floats& conv, uint64_t row, uint64_t h) {
  return conv.data() + row * g.conv_dim + 2 * g.nk * g.kd + h * g.vd;
}

struct RecurrenceRef {
  Doubles output;  // [rows, nv·vd]
  Doubles state;   // [sequences, nv, kd, vd]
};

// S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ, o_t = S_tᵀ q_t (numerics §5), FP64.
RecurrenceRef recurrence_ref(const GdnGeometry& g, uint64_t sequences, uint64_t L,
                             const Floats& conv, const Floats& gates, const Floats& state0) {
  const uint64_t kd = g.kd, vd = g.vd, nv = g.nv;
  RecurrenceRef ref;
  ref.output.assign(sequences * L * nv * vd, 0.0);
  ref.state.assign(state0.begin(), state0.end());
  for (uint64_t s = 0; s < sequences; ++s)
    for (uint64_t h = 0; h < nv; ++h) {
      double* S = ref.state.data() + (s * nv + h) * kd * vd;
      for (uint64_t p = 0; p < L; ++p) {
        const uint64_t t = s * L + p;
        const Doubles k = head_row(g, conv, t, h, false), q = head_row(g, conv, t, h, true);
        const float* v = value_row(g, conv, t, h);
        const double beta = gates[(t * nv + h) * 2], alpha = gates[(t * nv + h) * 2 + 1];
        for (uint64_t j = 0; j < vd; ++j) {
          double sk = 0.0;
          for (uint64_t i = 0; i < kd; ++i) sk += S[i * vd + j] * k[i];
          const double delta = beta * (v[j] - alpha * sk);
          double o = 0.0;
          for (uint64_t i = 0; i < kd; ++i) {
            S[i * vd + j] = alpha * S[i * vd + j] + k[i] * delta;
            o += S[i * vd + j] * q[i];
          }
          ref.output[t * nv * vd + h * vd + j] = o;
        }
      }
    }
  return ref;
}

// One chunked call: `streams` sequences of L rows (local rows, row0 already applied).
struct ChunkCall {
  GdnGeometry g;
  uint64_t streams = 0, L = 0, cps = 0;
  const Floats* conv = nullptr;
  const Floats* gates = nullptr;

  uint64_t regions() const { return streams * cps * g.nv; }
};

struct Region {
  uint64_t index = 0, row = 0, n = 0, h = 0;
};

Region region_of(const ChunkCall& c, uint64_t b, uint64_t chunk, uint64_t h) {
  Region r;
  r.index = (b * c.cps + chunk) * c.g.nv + h;
  r.row = b * c.L + chunk * kC;
  r.n = std::min(kC, c.L - chunk * kC);
  r.h = h;
  return r;
}

// Rows [0, n) × 128 of the region's normalised q or k.
Doubles head_rows(const ChunkCall& c, const Region& r, bool query) {
  Doubles out(r.n * kH);
  for (uint64_t i = 0; i < r.n; ++i) {
    const Doubles row = head_row(c.g, *c.conv, r.row + i, r.h, query);
    std::copy(row.begin(), row.end(), out.begin() + static_cast<std::ptrdiff_t>(i * kH));
  }
  return out;
}

double gate(const ChunkCall& c, const Region& r, uint64_t i, int which) {
  return (*c.gates)[((r.row + i) * c.g.nv + r.h) * 2 + static_cast<uint64_t>(which)];
}

// gc_i = Σ_{j≤i} log max(α_j, 1e-30), and Σ_{j≤i} |log max(α_j, 1e-30)| (for the bound).
std::pair<Doubles, Doubles> gc_ref(const ChunkCall& c, const Region& r) {
  Doubles gc(r.n), mag(r.n);
  double sum = 0.0, abs_sum = 0.0;
  for (uint64_t i = 0; i < r.n; ++i) {
    const double la = std::log(std::max(gate(c, r, i, 1), static_cast<double>(kGdnAlphaFloor)));
    sum += la;
    abs_sum += std::abs(la);
    gc[i] = sum;
    mag[i] = abs_sum;
  }
  return {gc, mag};
}

// (I + L) W = diag(β·exp(gc)) K, (I + L) U = diag(β) V, L_il = β_i exp(gc_i − gc_l) ⟨k_i, k_l⟩
// (l < i), by forward substitution in FP64 from the given gc. Rows [0, n) × 128 each.
void solve_wu(const ChunkCall& c, const Region& r, const Doubles& gc, Doubles& W, Doubles& U) {
  const Doubles k = head_rows(c, r, false);
  W.assign(r.n * kH, 0.0);
  U.assign(r.n * kH, 0.0);
  for (uint64_t i = 0; i < r.n; ++i) {
    const double beta = gate(c, r, i, 0);
    const float* v = value_row(c.g, *c.conv, r.row + i, r.h);
    for (uint64_t d = 0; d < kH; ++d) {
      W[i * kH + d] = beta * std::exp(gc[i]) * k[i * kH + d];
      U[i * kH + d] = beta * v[d];
    }
    for (uint64_t l = 0; l < i; ++l) {
      double dot = 0.0;
      for (uint64_t d = 0; d < kH; ++d) dot += k[i * kH + d] * k[l * kH + d];
      const double lil = beta * std::exp(gc[i] - gc[l]) * dot;
      for (uint64_t d = 0; d < kH; ++d) {
        W[i * kH + d] -= lil * W[l * kH + d];
        U[i * kH + d] -= lil * U[l * kH + d];
      }
    }
  }
}

// uc = U − W·S (rows [0, n)), S = [128][128].
Doubles uc_of(const Doubles& W, const Doubles& U, const Doubles& S, uint64_t n) {
  Doubles uc(n * kH);
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t j = 0; j < kH; ++j) {
      double ws = 0.0;
      for (uint64_t d = 0; d < kH; ++d) ws += W[i * kH + d] * S[d * kH + j];
      uc[i * kH + j] = U[i * kH + j] - ws;
    }
  return uc;
}

// S ← exp(gc_last)·S + Kᵀ·diag(exp(gc_last − gc))·uc.
void update_carry(Doubles& S, const Doubles& k, const Doubles& uc, const Doubles& gc, uint64_t n) {
  const double last = gc[n - 1];
  for (uint64_t d = 0; d < kH; ++d)
    for (uint64_t j = 0; j < kH; ++j) {
      double add = 0.0;
      for (uint64_t i = 0; i < n; ++i)
        add += k[i * kH + d] * std::exp(last - gc[i]) * uc[i * kH + j];
      S[d * kH + j] = std::exp(last) * S[d * kH + j] + add;
    }
}

// O_i = exp(gc_i)·q_i·S + Σ_{l≤i} ⟨q_i, k_l⟩ exp(gc_i − gc_l) uc_l (rows [0, n) × 128).
Doubles output_of(const Doubles& q, const Doubles& k, const Doubles& S, const Doubles& uc,
                  const Doubles& gc, uint64_t n) {
  Doubles o(n * kH, 0.0);
  for (uint64_t i = 0; i < n; ++i) {
    for (uint64_t j = 0; j < kH; ++j) {
      double qs = 0.0;
      for (uint64_t d = 0; d < kH; ++d) qs += q[i * kH + d] * S[d * kH + j];
      o[i * kH + j] = std::exp(gc[i]) * qs;
    }
    for (uint64_t l = 0; l <= i; ++l) {
      double dot = 0.0;
      for (uint64_t d = 0; d < kH; ++d) dot += q[i * kH + d] * k[l * kH + d];
      const double a = dot * std::exp(gc[i] - gc[l]);
      for (uint64_t j = 0; j < kH; ++j) o[i * kH + j] += a * uc[l * kH + j];
    }
  }
  return o;
}

// The whole chunked form in FP64 (every intermediate its own FP64 value): output [rows, nv·128]
// and the final states.
RecurrenceRef chunked_ref(const ChunkCall& c, const Floats& state0) {
  RecurrenceRef ref;
  ref.output.assign(c.streams * c.L * c.g.nv * kH, 0.0);
  ref.state.assign(state0.begin(), state0.end());
  for (uint64_t b = 0; b < c.streams; ++b)
    for (uint64_t h = 0; h < c.g.nv; ++h) {
      Doubles S(ref.state.begin() + static_cast<std::ptrdiff_t>((b * c.g.nv + h) * kH * kH),
                ref.state.begin() + static_cast<std::ptrdiff_t>((b * c.g.nv + h + 1) * kH * kH));
      for (uint64_t chunk = 0; chunk < c.cps; ++chunk) {
        const Region r = region_of(c, b, chunk, h);
        const Doubles gc = gc_ref(c, r).first;
        Doubles W, U;
        solve_wu(c, r, gc, W, U);
        const Doubles uc = uc_of(W, U, S, r.n);
        const Doubles k = head_rows(c, r, false), q = head_rows(c, r, true);
        const Doubles o = output_of(q, k, S, uc, gc, r.n);
        for (uint64_t i = 0; i < r.n; ++i)
          for (uint64_t j = 0; j < kH; ++j)
            ref.output[(r.row + i) * c.g.nv * kH + h * kH + j] = o[i * kH + j];
        update_carry(S, k, uc, gc, r.n);
      }
      std::copy(S.begin(), S.end(),
                ref.state.begin() + static_cast<std::ptrdiff_t>((b * c.g.nv + h) * kH * kH));
    }
  return ref;
}

// Rows [0, n) of a stored BF16 region [rows][128] widened to FP64.
Doubles widen(const Bits& all, uint64_t region, uint64_t region_rows, uint64_t n) {
  Doubles out(n * kH);
  for (uint64_t e = 0; e < n * kH; ++e) out[e] = fl(all[region * region_rows * kH + e]);
  return out;
}

// ============================================================== conv1d

TEST_F(CudaGdn, ConvMatchesDoubleLoopsAndShiftsTheTails) {
  const GdnGeometry g = geometry(1, 16, 2, 16, 4);  // 64 channels in rows of 96
  const uint64_t C = g.conv_dim, K = g.kernel, T = K - 1;
  for (const auto& [seqs, L] :
       std::vector<std::pair<uint64_t, uint64_t>>{{2, 1}, {2, 2}, {2, 65}, {1, 3}}) {
    SCOPED_TRACE("sequences " + std::to_string(seqs) + ", L " + std::to_string(L));
    GdnConvOp op = GdnConvOp::make(g, seqs * L, seqs);
    const uint64_t pool = oracle::place_in_pool({&op.weight, &op.state});
    Rig rig(*gpu_, {op.accesses()}, pool);
    const uint64_t rows = seqs * L, seed = 100 * L + seqs;
    const Bits x = bf16_values(rows * g.qkvz, seed, -2.0, 2.0);
    const Bits w = bf16_values(C * K, seed + 1, -0.5, 0.5);
    const Bits tail0 = bf16_values(seqs * C * T, seed + 2, -2.0, 2.0);
    rig.put(op.input, x);
    rig.put(op.weight, w);
    rig.put(op.state, tail0);
    gpu_->gdn_conv(rig.ws, op);
    const Floats out = rig.get<float>(op.output);
    const Bits tail = rig.get<uint16_t>(op.state);

    // Entry p of sequence s's [old tail | inputs] in channel c.
    const auto combined = [&](uint64_t s, uint64_t c, uint64_t p) {
      return p < T ? tail0[(s * C + c) * T + p] : x[(s * L + p - T) * g.qkvz + c];
    };
    Tally outputs("conv output");
    for (uint64_t s = 0; s < seqs; ++s)
      for (uint64_t t = 0; t < L; ++t)
        for (uint64_t c = 0; c < C; ++c) {
          double acc = 0.0, mag = 0.0;
          for (uint64_t j = 0; j < K; ++j) {
            const double term = fl(w[c * K + j]) * fl(combined(s, c, t + j));
            acc += term;
            mag += std::abs(term);
          }
          const double y = acc / (1.0 + std::exp(-acc));
          const uint64_t at = (s * L + t) * C + c;
          outputs.near(out[at], y,
                       2.0 * gamma(static_cast<double>(K)) * mag + 16.0 * kU * std::abs(y), at);
        }
    Bits want(seqs * C * T);
    for (uint64_t s = 0; s < seqs; ++s)
      for (uint64_t c = 0; c < C; ++c)
        for (uint64_t i = 0; i < T; ++i) want[(s * C + c) * T + i] = combined(s, c, L + i);
    EXPECT_EQ(tail, want) << "the tail state is not the last K−1 inputs";
  }
}

// ============================================================== gates

TEST_F(CudaGdn, GatesMatchDoubleLoops) {
  const GdnGeometry g = geometry(2, 8, 4, 8);
  const uint64_t rows = 7, nv = g.nv;
  GdnGatesOp op = GdnGatesOp::make(g, rows);
  const uint64_t pool = oracle::place_in_pool({&op.a_log, &op.dt_bias});
  Rig rig(*gpu_, {op.accesses()}, pool);
  Bits ba = bf16_values(rows * 2 * nv, 7, -8.0, 8.0);
  const Bits a = bf16_values(rows * nv, 8, -30.0, 25.0);
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t h = 0; h < nv; ++h) ba[t * 2 * nv + nv + h] = a[t * nv + h];
  Floats dt_bias = values(nv, 9, -1.0, 1.0);
  const Floats a_log = values(nv, 10, -2.0, 0.5);
  // Row 0: softplus arguments exactly 20 (log1p(exp(20)) side) and 20.5 (identity side).
  dt_bias[0] = 0.5f;
  dt_bias[1] = 0.5f;
  ba[nv + 0] = f32_to_bf16_bits(19.5f);
  ba[nv + 1] = f32_to_bf16_bits(20.0f);
  rig.put(op.ba, ba);
  rig.put(op.a_log, a_log);
  rig.put(op.dt_bias, dt_bias);
  gpu_->gdn_gates(rig.ws, op);
  const Floats gates = rig.get<float>(op.gates);

  Tally betas("beta"), alphas("alpha");
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t h = 0; h < nv; ++h) {
      const double b = fl(ba[t * 2 * nv + h]);
      const float x = bf16_bits_to_f32(ba[t * 2 * nv + nv + h]) + dt_bias[h];  // the FP32 sum
      const double sp = x > 20.0f ? static_cast<double>(x) : std::log1p(std::exp(double{x}));
      const double arg = std::exp(double{a_log[h]}) * sp;
      const double beta = 1.0 / (1.0 + std::exp(-b)), alpha = std::exp(-arg);
      const uint64_t at = t * nv + h;
      betas.near(gates[2 * at], beta, 8.0 * kU * beta, at);
      alphas.near(gates[2 * at + 1], alpha, (4.0 + 16.0 * arg) * kU * alpha, at);
    }
}

// ============================================================== gated norm

TEST_F(CudaGdn, GatedNormMatchesDoubleLoops) {
  // head_dim 160: more columns than the block's 128 threads.
  const GdnGeometry g = geometry(2, 8, 4, 160);
  const uint64_t rows = 3, heads = g.nv, hd = g.vd;
  const double eps = 1e-6;
  GdnGatedNormOp op = GdnGatedNormOp::make(g, rows, eps);
  const uint64_t pool = oracle::place_in_pool({&op.weight});
  Rig rig(*gpu_, {op.accesses()}, pool);
  Bits o = bf16_values(rows * heads * hd, 11, -3.0, 3.0);
  std::fill(o.begin() + static_cast<std::ptrdiff_t>((1 * heads + 2) * hd),
            o.begin() + static_cast<std::ptrdiff_t>((1 * heads + 3) * hd), uint16_t{0});
  const Bits z = bf16_values(rows * g.qkvz, 12, -4.0, 4.0);
  const Bits w = bf16_values(hd, 13, 0.5, 1.5);
  rig.put(op.io, o);
  rig.put(op.z, z);
  rig.put(op.weight, w);
  gpu_->gdn_gated_norm(rig.ws, op);
  const Bits y = rig.get<uint16_t>(op.io);

  Tally out("gated norm");
  for (uint64_t t = 0; t < rows; ++t)
    for (uint64_t h = 0; h < heads; ++h) {
      const uint64_t base = (t * heads + h) * hd;
      double ss = 0.0;
      for (uint64_t d = 0; d < hd; ++d) ss += fl(o[base + d]) * fl(o[base + d]);
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(hd) + eps);
      for (uint64_t d = 0; d < hd; ++d) {
        const double zv = fl(z[t * g.qkvz + g.conv_dim + h * hd + d]);
        const double want = fl(o[base + d]) * r * fl(w[d]) * zv / (1.0 + std::exp(-zv));
        out.near(fl(y[base + d]), want, kBf16Rel * std::abs(want), base + d);
      }
    }
}

// ============================================================== recurrence

struct RecurrenceCase {
  uint64_t nk, kd, nv, vd, row0, rows, sequences;  // sequences 0: a decode batch
};

TEST_F(CudaGdn, RecurrenceMatchesDoubleLoops) {
  for (const RecurrenceCase& rc : std::vector<RecurrenceCase>{{2, 32, 4, 48, 0, 10, 2},
                                                              {1, 256, 2, 256, 1, 3, 1},
                                                              {2, 64, 4, 40, 0, 3, 0},
                                                              {1, 128, 2, 128, 2, 130, 2}}) {
    const GdnGeometry g = geometry(rc.nk, rc.kd, rc.nv, rc.vd);
    GdnRecurrentOp op = GdnRecurrentOp::make(g, rc.row0, rc.rows, rc.sequences);
    const auto& d = op.shape();
    SCOPED_TRACE(op.params());
    const uint64_t pool = oracle::place_in_pool({&op.state});
    Rig rig(*gpu_, {op.accesses()}, pool);
    const uint64_t seed = rc.kd * 1000 + rc.rows;
    const Floats conv = values(rc.rows * g.conv_dim, seed, -1.0, 1.0);
    const Floats gates = gate_values(rc.rows, g.nv, seed + 1);
    const Floats state0 = values(d.sequences * g.nv * g.kd * g.vd, seed + 3, -0.5, 0.5);
    rig.put(op.conv, conv);
    rig.put(op.gates, gates);
    rig.put(op.state, state0);
    gpu_->gdn_recurrent(rig.ws, op);
    const Bits out = rig.get<uint16_t>(op.output);
    const Floats state = rig.get<float>(op.state);

    const RecurrenceRef ref = recurrence_ref(g, d.sequences, d.L, conv, gates, state0);
    const double out_abs = kAbsFrac * max_abs(ref.output);
    const double state_abs = kStateFrac * max_abs(ref.state);
    Tally outputs("recurrence output"), states("recurrence state");
    for (uint64_t i = 0; i < out.size(); ++i)
      outputs.near(fl(out[i]), ref.output[i], kBf16Rel * std::abs(ref.output[i]) + out_abs, i);
    for (uint64_t i = 0; i < state.size(); ++i) states.near(state[i], ref.state[i], state_abs, i);
  }
}

// ============================================================== chunked core

// The three stages of one call, sharing one state operand.
struct ChunkOps {
  GdnChunkOp wu, state, output;
  uint64_t pool = 0;

  ChunkOps(const GdnGeometry& g, uint64_t row0, uint64_t streams, uint64_t L)
      : wu(make(GdnChunkOp::Stage::wu, g, row0, streams, L)),
        state(make(GdnChunkOp::Stage::state, g, row0, streams, L)),
        output(make(GdnChunkOp::Stage::output, g, row0, streams, L)) {
    pool = oracle::place_in_pool({&wu.state});
    state.state = wu.state;
    output.state = wu.state;
  }
  std::vector<std::vector<Access>> accesses() const {
    return {wu.accesses(), state.accesses(), output.accesses()};
  }

 private:
  // nt = streams·cdiv(L, 64): the carve holds exactly this call's regions.
  static GdnChunkOp make(GdnChunkOp::Stage s, const GdnGeometry& g, uint64_t row0, uint64_t streams,
                         uint64_t L) {
    return GdnChunkOp::make(s, g, row0, streams, L, streams * ((L + kC - 1) / kC));
  }
};

struct ChunkInputs {
  Floats conv, gates, state0;
};

ChunkInputs chunk_inputs(const GdnGeometry& g, uint64_t streams, uint64_t L, uint64_t seed) {
  ChunkInputs in;
  in.conv = values(streams * L * g.conv_dim, seed, -1.0, 1.0);
  in.gates = gate_values(streams * L, g.nv, seed + 1);
  in.state0 = values(streams * g.nv * kH * kH, seed + 3, -0.5, 0.5);
  return in;
}

void upload(Rig& rig, const ChunkOps& ops, const ChunkInputs& in) {
  rig.put(ops.wu.conv_rows(), in.conv);
  rig.put(ops.wu.gate_rows(), in.gates);
  rig.put(ops.wu.state, in.state0);
}

// BF16 region rows [0, n) within kBf16Rel·|ref| + 2^-10·max|ref| (ref: per region, rows [0, n));
// rows [n, region_rows) exactly zero when `zero_tail`.
void check_regions(const std::string& what, const Bits& got, const std::vector<Doubles>& ref,
                   const std::vector<uint64_t>& n, uint64_t region_rows, bool zero_tail) {
  double m = 0.0;
  for (const Doubles& r : ref) m = std::max(m, max_abs(r));
  Tally tally(what);
  for (uint64_t reg = 0; reg < ref.size(); ++reg) {
    const uint64_t base = reg * region_rows * kH;
    for (uint64_t e = 0; e < n[reg] * kH; ++e)
      tally.near(fl(got[base + e]), ref[reg][e], kBf16Rel * std::abs(ref[reg][e]) + kAbsFrac * m,
                 base + e);
    if (zero_tail)
      for (uint64_t e = n[reg] * kH; e < region_rows * kH; ++e)
        tally.zero_bits(got[base + e], base + e);
  }
}

struct ChunkCase {
  uint64_t row0, streams, L;
};

const std::vector<ChunkCase> kChunkCases = {{0, 2, 1}, {0, 1, 64}, {3, 2, 65}, {0, 1, 130}};

TEST_F(CudaGdn, ChunkStagesMatchDoubleLoopsOnTheirStoredInputs) {
  const GdnGeometry g = geometry(2, kH, 4, kH);  // GQA: value heads 0, 1 → key head 0
  for (const ChunkCase& cc : kChunkCases) {
    ChunkOps ops(g, cc.row0, cc.streams, cc.L);
    SCOPED_TRACE(ops.wu.params());
    Rig rig(*gpu_, ops.accesses(), ops.pool);
    const ChunkInputs in = chunk_inputs(g, cc.streams, cc.L, 31 * cc.L + cc.streams);
    upload(rig, ops, in);
    const ChunkCall call{g,        cc.streams, cc.L, ops.wu.shape().chunks_per_stream,
                         &in.conv, &in.gates};
    std::vector<Region> regions(call.regions());
    std::vector<uint64_t> valid(call.regions());
    for (uint64_t b = 0; b < cc.streams; ++b)
      for (uint64_t c = 0; c < call.cps; ++c)
        for (uint64_t h = 0; h < g.nv; ++h) {
          const Region r = region_of(call, b, c, h);
          regions[r.index] = r;
          valid[r.index] = r.n;
        }

    // ---- wu: gc from the gates; W, U solved from the STORED gc.
    gpu_->gdn_chunk(rig.ws, ops.wu);
    const Floats gc = rig.get<float>(ops.wu.span(GdnChunkOp::Array::gc));
    const Bits W = rig.get<uint16_t>(ops.wu.span(GdnChunkOp::Array::W));
    const Bits U = rig.get<uint16_t>(ops.wu.span(GdnChunkOp::Array::U));
    std::vector<Doubles> stored_gc(regions.size()), w_ref(regions.size()), u_ref(regions.size());
    {
      Tally gcs("gc");
      for (const Region& r : regions) {
        const auto [want, mag] = gc_ref(call, r);
        for (uint64_t i = 0; i < kC; ++i) {
          const uint64_t at = r.index * kC + i;
          if (i < r.n)
            gcs.near(gc[at], want[i], static_cast<double>(i + 3) * 2.0 * kU * mag[i], at);
          else
            gcs.zero_bits(std::bit_cast<uint32_t>(gc[at]), at);
        }
        stored_gc[r.index].assign(gc.begin() + static_cast<std::ptrdiff_t>(r.index * kC),
                                  gc.begin() + static_cast<std::ptrdiff_t>(r.index * kC + r.n));
        solve_wu(call, r, stored_gc[r.index], w_ref[r.index], u_ref[r.index]);
      }
    }
    check_regions("W", W, w_ref, valid, kC, true);
    check_regions("U", U, u_ref, valid, kC, true);

    // ---- state: from the stored W, U, gc; the FP64 carry goes on from the STORED uc.
    gpu_->gdn_chunk(rig.ws, ops.state);
    const Bits S = rig.get<uint16_t>(ops.state.span(GdnChunkOp::Array::S));
    const Bits uc = rig.get<uint16_t>(ops.state.span(GdnChunkOp::Array::uc));
    const Floats state = rig.get<float>(ops.state.state);
    std::vector<Doubles> s_ref(regions.size()), uc_ref(regions.size());
    Doubles final_ref(state.size());
    for (uint64_t b = 0; b < cc.streams; ++b)
      for (uint64_t h = 0; h < g.nv; ++h) {
        const uint64_t sbase = (b * g.nv + h) * kH * kH;
        Doubles carry(in.state0.begin() + static_cast<std::ptrdiff_t>(sbase),
                      in.state0.begin() + static_cast<std::ptrdiff_t>(sbase + kH * kH));
        for (uint64_t c = 0; c < call.cps; ++c) {
          const Region r = region_of(call, b, c, h);
          s_ref[r.index] = carry;
          uc_ref[r.index] =
              uc_of(widen(W, r.index, kC, r.n), widen(U, r.index, kC, r.n), carry, r.n);
          update_carry(carry, head_rows(call, r, false), widen(uc, r.index, kC, r.n),
                       stored_gc[r.index], r.n);
        }
        std::copy(carry.begin(), carry.end(),
                  final_ref.begin() + static_cast<std::ptrdiff_t>(sbase));
      }
    check_regions("S snapshots", S, s_ref, std::vector<uint64_t>(regions.size(), kH), kH, false);
    check_regions("uc", uc, uc_ref, valid, kC, true);
    {
      Tally states("final state");
      const double tol = kStateFrac * max_abs(final_ref);
      for (uint64_t i = 0; i < state.size(); ++i) states.near(state[i], final_ref[i], tol, i);
    }

    // ---- output: from the stored S snapshot, uc and gc.
    gpu_->gdn_chunk(rig.ws, ops.output);
    const Bits out = rig.get<uint16_t>(ops.output.output_rows());
    std::vector<Doubles> o_ref(regions.size());
    for (const Region& r : regions)
      o_ref[r.index] =
          output_of(head_rows(call, r, true), head_rows(call, r, false), widen(S, r.index, kH, kH),
                    widen(uc, r.index, kC, r.n), stored_gc[r.index], r.n);
    double m = 0.0;
    for (const Doubles& o : o_ref) m = std::max(m, max_abs(o));
    Tally outputs("output");
    const uint64_t width = g.nv * kH;
    for (const Region& r : regions)
      for (uint64_t i = 0; i < r.n; ++i)
        for (uint64_t j = 0; j < kH; ++j) {
          const uint64_t at = (r.row + i) * width + r.h * kH + j;
          const double want = o_ref[r.index][i * kH + j];
          outputs.near(fl(out[at]), want, kBf16Rel * std::abs(want) + kAbsFrac * m, at);
        }
  }
}

// The three stages in a row give the recurrence's output and state, within what the BF16
// storage of W, U, uc and S costs (a few 2^-9 relative per term: 2^-6·max is far above it and
// far below any structural error).
TEST_F(CudaGdn, ChunkedCoreAgreesWithTheRecurrence) {
  const GdnGeometry g = geometry(2, kH, 4, kH);
  for (const ChunkCase& cc : kChunkCases) {
    ChunkOps ops(g, cc.row0, cc.streams, cc.L);
    SCOPED_TRACE(ops.wu.params());
    Rig rig(*gpu_, ops.accesses(), ops.pool);
    const ChunkInputs in = chunk_inputs(g, cc.streams, cc.L, 77 * cc.L + cc.streams);
    upload(rig, ops, in);
    gpu_->gdn_chunk(rig.ws, ops.wu);
    gpu_->gdn_chunk(rig.ws, ops.state);
    gpu_->gdn_chunk(rig.ws, ops.output);
    const Bits out = rig.get<uint16_t>(ops.output.output_rows());
    const Floats state = rig.get<float>(ops.state.state);

    const RecurrenceRef ref = recurrence_ref(g, cc.streams, cc.L, in.conv, in.gates, in.state0);
    Tally outputs("chunked output vs recurrence"), states("chunked state vs recurrence");
    const double out_tol = 0x1p-6 * max_abs(ref.output), state_tol = 0x1p-6 * max_abs(ref.state);
    for (uint64_t i = 0; i < out.size(); ++i) outputs.near(fl(out[i]), ref.output[i], out_tol, i);
    for (uint64_t i = 0; i < state.size(); ++i) states.near(state[i], ref.state[i], state_tol, i);
  }
}

// M-GDNCARRY carries the BF16 snapshot: the state it leaves is BF16-exact and not the clean
// FP32 state (the initial state is not BF16-exact, so even one chunk shows it).
TEST_F(CudaGdn, CarryMutantCarriesTheSnapshot) {
  const GdnGeometry g = geometry(1, kH, 2, kH);
  ChunkOps ops(g, 0, 2, 65);
  Rig rig(*gpu_, ops.accesses(), ops.pool);
  const ChunkInputs in = chunk_inputs(g, 2, 65, 5);
  const auto final_state = [&](Mutant m) {
    upload(rig, ops, in);
    gpu_->gdn_chunk(rig.ws, ops.wu);
    gpu_->set_kernel_mutant(m);
    try {
      gpu_->gdn_chunk(rig.ws, ops.state);
    } catch (...) {
      gpu_->set_kernel_mutant(Mutant::none);
      throw;
    }
    gpu_->set_kernel_mutant(Mutant::none);
    return rig.get<float>(ops.state.state);
  };
  const Floats clean = final_state(Mutant::none);
  const Floats mutant = final_state(Mutant::M_GDNCARRY);
  uint64_t inexact = 0, differ = 0;
  for (uint64_t i = 0; i < mutant.size(); ++i) {
    if (round_to_bf16(mutant[i]) != mutant[i]) ++inexact;
    if (mutant[i] != clean[i]) ++differ;
  }
  EXPECT_EQ(inexact, 0u) << "M-GDNCARRY left FP32 values in the state";
  EXPECT_GT(differ, mutant.size() / 2) << "M-GDNCARRY did not change the state";
}

// ============================================================== errors and memory

TEST_F(CudaGdn, RefusesWhatTheKernelsCannotHold) {
  {  // the chunked path runs kd = vd = 128 only
    ChunkOps ops(geometry(1, 64, 2, 128), 0, 1, 64);
    Rig rig(*gpu_, ops.accesses(), ops.pool);
    for (const GdnChunkOp* op : {&ops.wu, &ops.state, &ops.output})
      EXPECT_THROW(gpu_->gdn_chunk(rig.ws, *op), Error) << op->params();
  }
  {  // nv not a multiple of nk
    ChunkOps ops(geometry(2, kH, 3, kH), 0, 1, 64);
    Rig rig(*gpu_, ops.accesses(), ops.pool);
    for (const GdnChunkOp* op : {&ops.wu, &ops.state, &ops.output})
      EXPECT_THROW(gpu_->gdn_chunk(rig.ws, *op), Error) << op->params();
    GdnRecurrentOp rec = GdnRecurrentOp::make(geometry(2, 16, 3, 16), 0, 2);
    Rig rrig(*gpu_, {rec.accesses()}, oracle::place_in_pool({&rec.state}));
    EXPECT_THROW(gpu_->gdn_recurrent(rrig.ws, rec), Error);
  }
  {  // the recurrence holds kd, vd ≤ 256
    for (const GdnGeometry& g : {geometry(1, 257, 1, 16), geometry(1, 16, 1, 257)}) {
      GdnRecurrentOp rec = GdnRecurrentOp::make(g, 0, 2);
      Rig rig(*gpu_, {rec.accesses()}, oracle::place_in_pool({&rec.state}));
      EXPECT_THROW(gpu_->gdn_recurrent(rig.ws, rec), Error) << rec.params();
    }
  }
}

// DESIGN.md: backends allocate nothing inside execute(). After a warm-up pass over every GDN op
// (module loading, the shared-memory attribute), a second pass leaves device free memory
// exactly where it was.
TEST_F(CudaGdn, ExecuteAllocatesNothing) {
  const GdnGeometry g = geometry(2, kH, 4, kH);
  const uint64_t streams = 2, L = 65, rows = streams * L;
  GdnConvOp conv = GdnConvOp::make(g, rows, streams);
  GdnGatesOp gates = GdnGatesOp::make(g, rows);
  ChunkOps chunk(g, 0, streams, L);
  GdnRecurrentOp rec = GdnRecurrentOp::make(g, 0, rows, streams);
  GdnGatedNormOp norm = GdnGatedNormOp::make(g, rows, 1e-6);
  // Every pool operand its own range (weights hold whatever the pool holds: the ops only need
  // to run).
  uint64_t pool = oracle::place_in_pool({&conv.weight, &conv.state, &gates.a_log, &gates.dt_bias,
                                         &chunk.wu.state, &rec.state, &norm.weight});
  chunk.state.state = chunk.wu.state;
  chunk.output.state = chunk.wu.state;
  std::vector<std::vector<Access>> all = chunk.accesses();
  for (const auto& a : {conv.accesses(), gates.accesses(), rec.accesses(), norm.accesses()})
    all.push_back(a);
  Rig rig(*gpu_, all, pool);
  const auto run_all = [&] {
    gpu_->execute(rig.ws, conv);
    gpu_->execute(rig.ws, gates);
    gpu_->execute(rig.ws, chunk.wu);
    gpu_->execute(rig.ws, chunk.state);
    gpu_->execute(rig.ws, chunk.output);
    gpu_->execute(rig.ws, rec);
    gpu_->execute(rig.ws, norm);
    gpu_->synchronize();
  };
  run_all();
  size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  run_all();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before, free_after);
}

// ============================================================== the references themselves

// The FP64 chunked form (every stage's reference above, chained) equals the FP64 recurrence
// (numerics §5: ~1e-15 in FP64), so the stage references follow the spec and not just the
// kernels. Runs without a GPU.
TEST(CudaGdnReference, ChunkedFormEqualsTheRecurrence) {
  const GdnGeometry g = geometry(2, kH, 4, kH);
  for (const auto& [streams, L] :
       std::vector<std::pair<uint64_t, uint64_t>>{{2, 1}, {1, 64}, {2, 65}, {1, 130}}) {
    SCOPED_TRACE("streams " + std::to_string(streams) + ", L " + std::to_string(L));
    const ChunkInputs in = chunk_inputs(g, streams, L, 17 * L + streams);
    const ChunkCall call{g, streams, L, (L + kC - 1) / kC, &in.conv, &in.gates};
    const RecurrenceRef chunked = chunked_ref(call, in.state0);
    const RecurrenceRef rec = recurrence_ref(g, streams, L, in.conv, in.gates, in.state0);
    Tally outputs("FP64 chunked output"), states("FP64 chunked state");
    const double out_tol = 1e-9 * max_abs(rec.output), state_tol = 1e-9 * max_abs(rec.state);
    for (uint64_t i = 0; i < rec.output.size(); ++i)
      outputs.near(chunked.output[i], rec.output[i], out_tol, i);
    for (uint64_t i = 0; i < rec.state.size(); ++i)
      states.near(chunked.state[i], rec.state[i], state_tol, i);
  }
}

}  // namespace
}  // namespace bufferlab
