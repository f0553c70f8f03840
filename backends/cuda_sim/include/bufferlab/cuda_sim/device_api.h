// The CUDA names a kernel source of backends/cuda uses, for the host compiler: built-in
// variables, barriers and warp collectives (each a rendezvous in the simulator's executor),
// atomics, the device math functions (results within CUDA's documented ulp bound, perturbed
// by a seeded amount), the runtime calls the backend makes and the launch. Included only
// through backends/cuda/src/cuda_platform.h with BUFFERLAB_CUDA_SIM; everything here lives in
// bufferlab::sim, so no symbol collides with the real runtime's.
#pragma once

#include <cmath>  // INFINITY, NAN
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "bufferlab/cuda_sim/cub_shim.h"
#include "bufferlab/cuda_sim/cublas_shim.h"
#include "bufferlab/cuda_sim/runtime_shim.h"

// CUDA's declaration specifiers. Device functions are always inlined: the instrumentation
// hooks see a store only as an assignment, and a call returning a struct straight into
// device memory (`out[i] = pack(v)`) would be a store it never reports.
#define __global__
#define __device__ __attribute__((always_inline))
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict

// Built-in variables: the running simulated thread's.
#define threadIdx (::bufferlab::sim::thread_idx())
#define blockIdx (::bufferlab::sim::block_idx())
#define blockDim (::bufferlab::sim::block_dim())
#define gridDim (::bufferlab::sim::grid_dim())

namespace bufferlab::sim {

// ---- The executor's entry points (executor.cpp) ----

device::uint3 thread_idx();
device::uint3 block_idx();
device::dim3 block_dim();
device::dim3 grid_dim();

// The block's copy of one `__shared__` object (`site` tells the declarations apart): the
// first thread to reach the declaration places it in the block's shared arena.
void* shared_object_at(const void* site, const char* name, size_t bytes, size_t align);
template <class T>
T& shared_object(const void* site, const char* name) {
  static_assert(std::is_trivially_default_constructible_v<T>, "shared memory is not constructed");
  return *static_cast<T*>(shared_object_at(site, name, sizeof(T), alignof(T)));
}
void* dynamic_shared_base();
template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_base());
}

struct LaunchSpec {
  const char* kernel = "";
  const void* entry = nullptr;  // identifies the kernel (cudaFuncSetAttribute's key)
  device::dim3 grid, block;
  size_t dynamic_shared = 0;
};

// A non-owning callable: the body every simulated thread runs.
struct ThreadBody {
  void (*call)(void*) = nullptr;
  void* state = nullptr;
  void operator()() const { call(state); }
};

// Validates the configuration as the driver does (an error it refuses is recorded as the
// runtime's last error, the launch does not run), then runs every block.
void run_launch(const LaunchSpec& spec, ThreadBody body);

template <class... P, class... A>
void launch(const char* name, void (*kernel)(P...), device::dim3 grid, device::dim3 block,
            size_t dynamic_shared, device::cudaStream_t /*stream*/, A&&... args) {
  // Each thread gets its own copy of the parameters, as from the constant bank.
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  struct State {
    void (*kernel)(P...);
    const std::tuple<std::decay_t<P>...>* params;
  } state{kernel, &params};
  ThreadBody body{[](void* s) {
                    auto* st = static_cast<State*>(s);
                    auto copy = *st->params;
                    std::apply(st->kernel, copy);
                  },
                  &state};
  run_launch(LaunchSpec{name, reinterpret_cast<const void*>(kernel), grid, block, dynamic_shared},
             body);
}

// ---- Barriers and warp collectives (executor.cpp) ----

void syncthreads(const char* file, int line);
int syncthreads_or(int predicate, const char* file, int line);
int syncthreads_and(int predicate, const char* file, int line);
int syncthreads_count(int predicate, const char* file, int line);
void syncwarp(unsigned mask, const char* file, int line);

enum class ShuffleKind { idx, up, down, bfly };
// Exchanges 8 bytes per lane; `arg` is the source lane / delta / xor mask.
uint64_t shuffle(ShuffleKind kind, unsigned mask, uint64_t value, int arg, int width,
                 const char* file, int line);
enum class VoteKind { any, all, ballot };
unsigned vote(VoteKind kind, unsigned mask, int predicate, const char* file, int line);

template <class T>
T shuffle_as(ShuffleKind kind, unsigned mask, T v, int arg, int width, const char* file, int line) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of ≤ 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shuffle(kind, mask, bits, arg, width, file, line);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// ---- Atomics (executor.cpp: read-modify-write under the checkers, as one access) ----

void atomic_rmw(void* address, size_t bytes, void (*op)(void* cell, const void* operand, void* old),
                const void* operand, void* old);

// The read-modify-write itself, left out of the instrumentation: atomic_rmw checks the
// access once, as an atomic one.
template <class T, class F>
__attribute__((no_sanitize_thread)) void atomic_cell(void* cell, const void* operand, void* old) {
  T current, value;
  std::memcpy(&current, cell, sizeof(T));
  std::memcpy(&value, operand, sizeof(T));
  std::memcpy(old, &current, sizeof(T));
  const T next = F{}(current, value);
  std::memcpy(cell, &next, sizeof(T));
}

template <class T, class F>
T atomic_apply(T* address, T operand, F) {
  T old{};
  atomic_rmw(address, sizeof(T), &atomic_cell<T, F>, &operand, &old);
  return old;
}

struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct ExchOp {
  template <class T>
  T operator()(T, T b) const {
    return b;
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinOp {
  template <class T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};
struct OrOp {
  template <class T>
  T operator()(T a, T b) const {
    return a | b;
  }
};

// ---- Device math (device_math.cpp) ----

// The functions CUDA documents with an ulp bound > 0.5 return the exact result rounded, moved
// by a seeded whole number of ulps that keeps it within the bound (the same input always
// gives the same output, as on a device).
enum class MathFn { exp, exp2, expm1, log, log2, log1p, sin, cos, tanh, rsqrt, pow, erf };
float device_math(MathFn fn, float x, float y = 0.0f);

namespace device {

#define BUFFERLAB_SIM_SITE __FILE__, __LINE__

inline constexpr int warpSize = 32;

// Barriers.
#define __syncthreads() ::bufferlab::sim::syncthreads(BUFFERLAB_SIM_SITE)
#define __syncthreads_or(p) ::bufferlab::sim::syncthreads_or((p), BUFFERLAB_SIM_SITE)
#define __syncthreads_and(p) ::bufferlab::sim::syncthreads_and((p), BUFFERLAB_SIM_SITE)
#define __syncthreads_count(p) ::bufferlab::sim::syncthreads_count((p), BUFFERLAB_SIM_SITE)
#define __syncwarp(...) \
  ::bufferlab::sim::syncwarp(::bufferlab::sim::device::warp_mask(__VA_ARGS__), BUFFERLAB_SIM_SITE)
inline unsigned warp_mask(unsigned m = 0xFFFFFFFFu) { return m; }

// Warp shuffles and votes (the site is the call's, for the rendezvous and the finding).
#define __shfl_sync(m, v, l, ...)                                                 \
  ::bufferlab::sim::shuffle_as(::bufferlab::sim::ShuffleKind::idx, (m), (v), (l), \
                               ::bufferlab::sim::device::shfl_width(__VA_ARGS__), \
                               BUFFERLAB_SIM_SITE)
#define __shfl_up_sync(m, v, d, ...)                                              \
  ::bufferlab::sim::shuffle_as(::bufferlab::sim::ShuffleKind::up, (m), (v), (d),  \
                               ::bufferlab::sim::device::shfl_width(__VA_ARGS__), \
                               BUFFERLAB_SIM_SITE)
#define __shfl_down_sync(m, v, d, ...)                                             \
  ::bufferlab::sim::shuffle_as(::bufferlab::sim::ShuffleKind::down, (m), (v), (d), \
                               ::bufferlab::sim::device::shfl_width(__VA_ARGS__),  \
                               BUFFERLAB_SIM_SITE)
#define __shfl_xor_sync(m, v, x, ...)                                              \
  ::bufferlab::sim::shuffle_as(::bufferlab::sim::ShuffleKind::bfly, (m), (v), (x), \
                               ::bufferlab::sim::device::shfl_width(__VA_ARGS__),  \
                               BUFFERLAB_SIM_SITE)
inline int shfl_width(int w = 32) { return w; }
#define __any_sync(m, p) \
  (::bufferlab::sim::vote(::bufferlab::sim::VoteKind::any, (m), (p), BUFFERLAB_SIM_SITE) != 0)
#define __all_sync(m, p) \
  (::bufferlab::sim::vote(::bufferlab::sim::VoteKind::all, (m), (p), BUFFERLAB_SIM_SITE) != 0)
#define __ballot_sync(m, p) \
  ::bufferlab::sim::vote(::bufferlab::sim::VoteKind::ballot, (m), (p), BUFFERLAB_SIM_SITE)

// Atomics.
template <class T>
T atomicAdd(T* address, T v) {
  return ::bufferlab::sim::atomic_apply(address, v, ::bufferlab::sim::AddOp{});
}
template <class T>
T atomicExch(T* address, T v) {
  return ::bufferlab::sim::atomic_apply(address, v, ::bufferlab::sim::ExchOp{});
}
template <class T>
T atomicMax(T* address, T v) {
  return ::bufferlab::sim::atomic_apply(address, v, ::bufferlab::sim::MaxOp{});
}
template <class T>
T atomicMin(T* address, T v) {
  return ::bufferlab::sim::atomic_apply(address, v, ::bufferlab::sim::MinOp{});
}
template <class T>
T atomicOr(T* address, T v) {
  return ::bufferlab::sim::atomic_apply(address, v, ::bufferlab::sim::OrOp{});
}

// Classification and IEEE-exact operations (CUDA: 0 ulp; the host's are the same).
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline float fabsf(float x) { return __builtin_fabsf(x); }
inline float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
inline float fminf(float a, float b) { return __builtin_fminf(a, b); }
inline float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float sqrtf(float x) { return __builtin_sqrtf(x); }  // IEEE (-prec-sqrt=true)
inline float floorf(float x) { return __builtin_floorf(x); }
inline float ceilf(float x) { return __builtin_ceilf(x); }
inline float truncf(float x) { return __builtin_truncf(x); }
inline float rintf(float x) { return __builtin_rintf(x); }
inline float copysignf(float a, float b) { return __builtin_copysignf(a, b); }
inline float frexpf(float x, int* e) { return __builtin_frexpf(x, e); }
inline float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
inline float nextafterf(float a, float b) { return __builtin_nextafterf(a, b); }
// Volatile so the host compiler cannot fuse them into an FMA (the point of the _rn forms).
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __int_as_float(int v) { return __builtin_bit_cast(float, v); }
inline int __float_as_int(float v) { return __builtin_bit_cast(int, v); }
inline float __uint_as_float(unsigned v) { return __builtin_bit_cast(float, v); }
inline unsigned __float_as_uint(float v) { return __builtin_bit_cast(unsigned, v); }

// Functions with an ulp bound (CUDA C++ Programming Guide, "Mathematical Functions").
inline float expf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::exp, x);
}
inline float exp2f(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::exp2, x);
}
inline float expm1f(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::expm1, x);
}
inline float logf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::log, x);
}
inline float log2f(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::log2, x);
}
inline float log1pf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::log1p, x);
}
inline float sinf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::sin, x);
}
inline float cosf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::cos, x);
}
inline float tanhf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::tanh, x);
}
inline float rsqrtf(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::rsqrt, x);
}
inline float erff(float x) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::erf, x);
}
inline float powf(float x, float y) {
  return ::bufferlab::sim::device_math(::bufferlab::sim::MathFn::pow, x, y);
}

}  // namespace device
}  // namespace bufferlab::sim
