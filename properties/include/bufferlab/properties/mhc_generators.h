// RapidCheck generator of mHC hyper-connection cases (docs/spec/numerics.md §3–§4, core
// ops/mhc.h): the hc fields of a config (hc_mult 1..16, hc_lowrank r up to 512,
// hc_sinkhorn_iters 1..50, hc_eps 0 or 1e-6), the token count and the input profile of the
// oracle's seeded inputs (oracle/mhc_inputs.h: comb logit range 0.01..60, normal / zero / huge
// streams, NaN / ±Inf planted at chosen coordinates). Dimensions are drawn under the per-case
// cost cap of the op the case is for (the formulas below). One generator for the CI
// properties, the full-range slow suite and `bufferlab fuzz`; the ranges say which.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_inputs.h"

namespace bufferlab::gen {

// The op a case is drawn for: it picks the cost formula the dimensions are capped by, and
// whether the config has a low-rank form (lowrank: hc_lowrank = r > 0; post: either form,
// r > 0 in about one case in three; pre, head and expand: hc_lowrank = 0).
enum class MhcOpKind { pre, post, head, expand, lowrank };
const char* to_string(MhcOpKind k);

// Oracle multiply-adds of one op over T tokens, the figure the generator caps
// (docs/architecture.md: ≤ ~2^26 per case in CI). The judges' own work is a small multiple of it —
// each runs the oracle faithful and exact and forms per-element bounds (measured on one core at
// 2^26: judge_mhc_lowrank ~0.9 s, mhc_lowrank_path_bounds another ~0.9 s):
//   pre      T·(2 + hc)·hc·hc·h      the mix GEMV ((2 + hc)·hc rows of length hc·h); the
//                                    Sinkhorn (≈ 4·iters·hc² per token) and the block input
//                                    (hc·h) are below it
//   post     T·hc·h·(hc + 1)         Σ_i comb_ij·x_i + post_j·block_out for every (j, d)
//   head     T·hc·hc·h               the hc-row mix GEMV (and hc·h for y)
//   expand   T·hc·h                  copies
//   lowrank  T·hc·h·(2r + hc)        W_down (r rows), W_up (hc·h rows of r), W_inject (hc rows)
uint64_t mhc_op_cost(MhcOpKind kind, uint64_t rows, uint64_t hc, uint64_t h, uint64_t r);

struct MhcRanges {
  uint64_t max_mhc = kMaxMhcMult;              // 16
  uint64_t min_hidden = 1, max_hidden = 1024;  // min_hidden: the slow suite's large-h cases
  uint64_t min_rows = 1, max_rows = 65;        // CI: 64 and 65 (the split / slab switch) in range
  uint64_t max_lowrank = 512;
  uint64_t max_iters = 50;
  uint64_t cost_cap = uint64_t{1} << 26;  // mhc_op_cost per case
  // Replace the drawn row count by a slab boundary one (2048, 2049, 4097; within
  // [min_rows, max_rows]) in about one case in three: full range only (a 2049-row low-rank
  // case costs 2049·hc·h·(2r + hc)).
  bool slab_boundary = false;
};
// tests/property (docs/architecture.md's 2^26 per case; rows 1..65) and the full range of
// tests/slow/numeric/test_mhc_full_range.cpp and `fuzz --numeric mhc` (hidden up to 7168, rows up
// to 4097 with the T = 2049 slab boundary, 2^28 per case, ~4 s of judging at the largest).
MhcRanges ci_mhc_ranges();
MhcRanges full_mhc_ranges();

struct MhcCase {
  MhcOpKind kind = MhcOpKind::pre;
  // hidden_size, hc_mult, hc_lowrank, hc_sinkhorn_iters, hc_eps, rms_norm_eps (vocab_size 16;
  // nothing else is set).
  ModelConfig config;
  uint64_t rows = 1;
  // lowrank: the path the harness runs (split needs rows ≤ 64; slab runs any rows — the
  // engine takes it for T > 64, and rows ≤ 64 on both paths is how the two are compared).
  oracle::MhcLowRankPath path = oracle::MhcLowRankPath::split;
  oracle::MhcInputProfile profile;  // magnitude, scale, logit range, planted non-finite values
  uint64_t seed = 0;

  uint64_t hc() const { return config.hc_mult; }
  uint64_t h() const { return config.hidden_size; }
  uint64_t r() const { return config.hc_lowrank; }
  uint64_t cost() const { return mhc_op_cost(kind, rows, hc(), h(), r()); }
  oracle::MhcLowRankDims lowrank_dims() const;
  std::string describe() const;  // one line: every field, the seed included
};
void showValue(const MhcCase& c, std::ostream& os);

// A case of `kind`: hc (1, 2, 4, 16 favoured), hidden (log-uniform from min_hidden up to 64 or
// up to max_hidden, half and half), rows in [min_rows, max_rows] (half within 8 of min_rows), r
// (lowrank: max_lowrank in one case in eight, else as hidden), iters (1, 2, 20, 50 favoured),
// hc_eps ∈ {0, 1e-6}, the stream magnitude (normal at 2^-8..2^8, all zero, huge ~1e30), the comb
// logit range (0.01, 1, 4, 20, 60 and log-uniform between), and in about one case in five 1–3 NaN /
// ±Inf planted. The larger of hidden and r, then rows (never below min_rows), is halved until
// mhc_op_cost fits the cap (h may fall below min_hidden then); hc is never reduced. RapidCheck's
// size scales every draw: the largest values come in the last cases of a run. Every draw shrinks
// towards small dimensions and finite inputs.
rc::Gen<MhcCase> hc_case(MhcOpKind kind, const MhcRanges& ranges);

// The oracle's seeded inputs of a case (oracle/mhc_inputs.h), a pure function of it.
oracle::MhcPreInputs mhc_pre_inputs(const MhcCase& c);
oracle::MhcPostInputs mhc_post_inputs(const MhcCase& c);
oracle::MhcHeadInputs mhc_head_inputs(const MhcCase& c);
std::vector<uint16_t> mhc_expand_input(const MhcCase& c);
oracle::MhcLowRankInputs mhc_lowrank_inputs(const MhcCase& c);

}  // namespace bufferlab::gen
