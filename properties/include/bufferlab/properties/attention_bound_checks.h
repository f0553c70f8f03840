// Bound-based attention properties (the "Under derived bounds" list; docs/spec/attention.md
// §4, §5), each one body over any Backend (the CPU property suite; the kernel tests can run the
// same on the simulator) on a decode pass (oracle/attention_harness.h). Unlike the
// bit-exact properties (test_attention_properties.cpp) these compare outputs that are computed in
// a different order, so each comparison is under a bound DERIVED below from the oracle's stage
// bounds (oracle/src/attention_bounds.cpp), evaluated on each run's own stored inputs:
//
//   1. Split-K (S > 1, then the merge) vs one split of the same decode pass. Notation per element:
//      v1 = the FP64 core (oracle attn_core_fp64, one split, its pre-store bound e1), vm = the
//      FP64 merge of the STORED partials (attn_merge_fp64, bound eS), and
//      st(y, e) = e + ulp(|y| + e) the bound of a BF16 store (oracle stored_bf16). Then
//        |outS − out1| ≤ |outS − rb(vm)| + |rb(vm) − rb(v1)| + |rb(v1) − out1|
//                      ≤ st(vm, eS) + st(v1, Δ + ε) + st(v1, e1),
//      Δ bounding |vm − v1| from the partials' bounds (attn_partials_fp64 against the stored
//      partials, l relative to the STORED m_k, so the exact merge of the exact parts is v1):
//      with a_k = e^(m̂_k − M), ŵ_k = l̂_k a_k, δw_k = bound(l_k)·a_k, D̂ = Σ ŵ_k (+ e^(σ − M)),
//        |N̂ − N| ≤ Σ_k ŵ_k·bound(o_k) + δw_k·(|ô_k| + bound(o_k)),  |D̂ − D| ≤ Σ_k δw_k,
//        Δ = (|N̂ − N| + |v1|·|D̂ − D|) / D̂      (vm − v1 = (N̂ − N)/D̂ − v1·(D̂ − D)/D̂).
//      ε = 2^-40·(1 + |v1|) covers the FP64 evaluation of the references (≤ ~100 terms, each
//      γ_n(2^-53) ≪ 2^-40). Twin: the merge computed with one part's rescale dropped (its stored
//      m_k replaced by the row's maximum, so e^(m_k − M) = 1) must break the bound.
//   2. A sliding layer vs full attention over the window's keys only: row p's keys [lo, p],
//      lo = max(0, p − W + 1), given to the full-attention reference (window 0) as a sequence of
//      their own. Both references reduce the same keys in the same order, so the bound is the
//      sliding core's own (its tiles are the backend's): |out − rb(v_restricted)| ≤
//      st(v_restricted, e_sliding + ε). Twin: the reference given one key more ([lo − 1, p]; that
//      key's V set to 64).
//   3. With sinks, V set to BF16 1.0 everywhere: o = Σ_j w_j = l / (l + e^(σ − m)) = 1 − the
//      sink's share, with m, l from the oracle's no-sink single part (attn_partials_fp64, S = 1)
//      and σ the FP32 sink; |out − rb(expected)| ≤ st(expected, e_core + ε), e_core the core's
//      bound on the same inputs (whose FP64 value is the same number). Twin: the sink ignored
//      (expected 1).
// Each body returns the largest |diff| / bound over the live decode rows' outputs (> 1: the
// property fails, and `where` names the first worst element). With `plant` the body computes its
// twin instead, whose result must exceed 1; `applicable` is false when the case cannot show the
// twin (the test discards it), true otherwise. `bm`: the backend's bound model (the judge's:
// oracle::device_bounds() off the CPU).
#pragma once

#include <cstdint>
#include <string>

#include "bufferlab/core/backend.h"
#include "bufferlab/oracle/attention_harness.h"
#include "bufferlab/oracle/bounds.h"

namespace bufferlab::gen {

struct AttnBoundResult {
  bool applicable = false;
  double worst = 0.0;  // max |diff| / bound (0 when every element agrees bit for bit)
  std::string where;
  uint64_t elements = 0, differing = 0;
  double bound_ulps = 0.0;  // Σ bound / ulp_bf16(reference): the bound's size, for reports
};

// (1) `c`: live decode rows, splits ≥ 2; runs it and the same with one split.
AttnBoundResult attn_split_vs_one_split(Backend& b, const oracle::AttnCase& c, bool plant,
                                        const oracle::BoundModel& bm = oracle::cpu_bounds());
// (2) `c`: live decode rows, one split, a sliding layer.
AttnBoundResult attn_sliding_vs_window(Backend& b, oracle::AttnCase c, bool plant,
                                       const oracle::BoundModel& bm = oracle::cpu_bounds());
// (3) `c`: live decode rows, one split, sinks; the body sets every V to 1.
AttnBoundResult attn_sink_share(Backend& b, oracle::AttnCase c, bool plant,
                                const oracle::BoundModel& bm = oracle::cpu_bounds());

}  // namespace bufferlab::gen
