// The CPU backend's parallel loops: an OpenMP region only when it would run with more than one
// thread. libgomp allocates (and frees at the region's end) the team of every region that runs
// with one thread — `if(false)`, num_threads(1), OMP_NUM_THREADS=1 — while teams of more
// threads are cached; "Backends allocate nothing inside execute()" (docs/architecture.md), so a
// region that would get one thread runs as the plain loop instead. Only the scheduling differs:
// each index runs the same body, and the sums are of integers. Private to the CPU backend.
#pragma once

#include <omp.h>

#include <cstdint>

namespace bufferlab::cpu {

// Below this much work (elements times their inner length) a thread team costs more than it
// saves: the threshold every CPU op family's `if` clause uses.
inline constexpr uint64_t kParallelMinWork = uint64_t{1} << 15;

// Whether a region asked for (`parallel`) would run with a team of more than one thread.
inline bool runs_in_team(bool parallel) { return parallel && omp_get_max_threads() > 1; }

// body(i) for i in [0, n): statically scheduled over the threads when `parallel` (and more than
// one thread is available), else in order on the calling thread.
template <class Body>
void parallel_for(int64_t n, bool parallel, Body body) {
  if (!runs_in_team(parallel)) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// Σ body(i) over i in [0, n), scheduled as parallel_for (an integer sum: any order is exact).
template <class Body>
uint64_t parallel_sum(int64_t n, bool parallel, Body body) {
  uint64_t sum = 0;
  if (!runs_in_team(parallel)) {
    for (int64_t i = 0; i < n; ++i) sum += body(i);
    return sum;
  }
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += body(i);
  return sum;
}

// body(item, thread) for item in [0, items) on a team of `threads` (dynamic schedule), `thread`
// being the running thread's number (< threads: it picks that thread's scratch). A team of one
// is the items in order as thread 0 outside any region — only when OpenMP offers one thread,
// as then Eigen's GEMM stays serial outside a team too (it starts threads of its own, with
// allocations, unless it runs in a team of several or OpenMP offers one thread).
template <class Body>
void parallel_items(int64_t items, int threads, Body body) {
  if (threads == 1 && omp_get_max_threads() == 1) {
    for (int64_t item = 0; item < items; ++item) body(item, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) body(item, thread);
  }
}

}  // namespace bufferlab::cpu
