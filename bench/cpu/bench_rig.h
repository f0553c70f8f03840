// Setup helpers shared by the CPU benchmarks that run ops on a testing::Rig
// (tests/support/workspace_rig.h, on the process's CPU backend): one op and its Rig, the
// accesses of a list of ops, and seeded uploads (tests/support/seeded_values.h). Header-only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "bufferlab/core/error.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/oracle/pool_placement.h"
#include "cpu_backend.h"
#include "seeded_values.h"
#include "workspace_rig.h"

namespace bufferlab::bench {

// One op and a Rig holding its footprint (poisoned).
template <class Op>
struct OpRig {
  Op op;
  std::optional<testing::Rig> rig;
};

// Places the op's pool operands `weights` one after the other, then makes its Rig.
template <class Op>
void make_rig(OpRig<Op>& s, std::initializer_list<TensorRef*> weights) {
  const uint64_t pool = oracle::place_in_pool(weights);
  s.rig.emplace(testing::cpu_backend(), std::vector<std::vector<Access>>{s.op.accesses()}, pool);
}

// The accesses of each op, for one Rig holding them all.
template <class Op>
std::vector<std::vector<Access>> accesses_of(const std::vector<Op>& ops) {
  std::vector<std::vector<Access>> all;
  for (const Op& op : ops) all.push_back(op.accesses());
  return all;
}

// Uploads values 0 .. n−1 of stream `seed` (testing::seeded_values, in [−scale, scale)) into
// the whole of t: FP32, or rounded to BF16 for a bf16 tensor.
inline void put_seeded(testing::Rig& rig, const TensorRef& t, uint64_t seed, float scale) {
  if (t.dtype == DType::bf16)
    rig.put(t, testing::seeded_bf16_values(t.elements(), seed, scale));
  else if (t.dtype == DType::f32)
    rig.put(t, testing::seeded_values(t.elements(), seed, scale));
  else
    throw Error("put_seeded " + t.to_string() + ": not f32 or bf16");
}

}  // namespace bufferlab::bench
