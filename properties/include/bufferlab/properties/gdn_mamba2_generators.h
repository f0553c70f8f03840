// RapidCheck generators of Gated DeltaNet and Mamba-2 SSD cases (docs/spec/numerics.md §5, §6;
// core ops/gdn.h, ops/mamba2.h): the linear_* / mamba_* fields of a config, the number of
// co-dispatched sequences, their length L, the path the harness runs (chunked or the
// recurrence) and the input profile of the oracle's seeded inputs (oracle/gdn.h, ssd.h). L
// comes from the chunk edges {1, 63, 64, 65, 127, …} in about half of the cases; the
// dimensions are then reduced until the case's cost (formulas below) fits the cap. One
// generator for the CI properties, the full-range slow suite and `bufferlab fuzz`; the ranges
// say which.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_harness.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mamba2_harness.h"

namespace bufferlab::gen {

// Oracle multiply-adds of one call over T = sequences·L tokens, the figure the generators cap
// (docs/architecture.md: ≤ ~2^26 per case in CI). The judges evaluate it a few times over
// (faithful, exact, each stage on the stored inputs, per-element bounds): measured on one core,
// judge_gdn takes ~13 ns per unit of this cost (0.84 s at 2^26), the backend ~0.7 ns, the exact
// reference ~1.3 ns. The CI ranges therefore cap a case at 2^23 (≤ ~0.12 s of judging) so that
// a property's 100 cases take about a second; the slow suite goes to 2^30.
//   GDN chunked    T·nv·(64·(kd + vd) + 3·kd·vd)   per token: its row of Q Kᵀ and of the
//                                                  (I + L) solve (64·kd), (Q Kᵀ ⊙ M)·uc
//                                                  (64·vd), and W·S_c, Q·S_c, the state
//                                                  update Kᵀ·uc (kd·vd each)
//   GDN recurrence T·nv·3·kd·vd                    Sᵀk, the rank-one update, Sᵀq
// (conv1d T·conv_dim·K, the gates and the gated norm T·nv·vd are below both).
uint64_t gdn_call_cost(oracle::GdnPath path, uint64_t T, uint64_t nv, uint64_t kd, uint64_t vd);
//   SSD chunked    T·H·(64·P + 2·N·P) + T·G·64·N    the intra-chunk Σ_s CB·x (64·P), C·h0 and
//                                                  the state update (N·P each); CB (64·N per
//                                                  group)
//   SSD recurrence T·H·2·N·P                        h update and h·C
uint64_t mamba2_call_cost(oracle::Mamba2Path path, uint64_t T, uint64_t H, uint64_t P, uint64_t N,
                          uint64_t G);

// ---- Gated DeltaNet ------------------------------------------------------------------------

struct GdnRanges {
  uint64_t max_sequences = 4;
  uint64_t max_L = 127;
  std::vector<uint64_t> favoured_L = {1, 63, 64, 65, 127};  // chunk edges, drawn often
  uint64_t max_key_heads = 4;
  uint64_t max_gqa = 4;  // nv / nk
  // Head sizes of the recurrence cases (kd, vd drawn independently); the chunked cases are
  // kd = vd = 128 (about half of all cases).
  uint64_t min_head_dim = 8, max_head_dim = 96;
  uint64_t cost_cap = uint64_t{1} << 23;  // gdn_call_cost per case
  // Cap the chunked formula whatever the path (the FP64 identity runs both algorithms).
  bool cap_chunked_cost = false;
  bool chunked_only = false;  // kd = vd = 128 on the chunked path in every case
  // Full range: about one case in three has many short-chunked streams (sequences in
  // [max_sequences/2, max_sequences], L % 64 ≠ 0), B15's condition.
  bool many_streams = false;
};
// tests/property (T ≤ 4·127, 2^23: a chunked case holds T·nv ≤ 128, e.g. one head over
// L = 127) and the full range of tests/slow/numeric/test_gdn_full_range.cpp
// (sequences up to 16, L up to 4096, 2^30 per case).
GdnRanges ci_gdn_ranges();
GdnRanges full_gdn_ranges();

struct GdnCase {
  // linear_num_key_heads / key_head_dim / num_value_heads / value_head_dim / conv_kernel_dim,
  // rms_norm_eps; one linear_attention layer (hidden_size 64, vocab_size 16).
  ModelConfig config;
  uint64_t sequences = 1, L = 1;
  oracle::GdnPath path = oracle::GdnPath::recurrent;  // chunked only when kd = vd = 128
  oracle::GdnInputProfile profile;
  uint64_t seed = 0;

  uint64_t nk() const { return config.linear_num_key_heads; }
  uint64_t kd() const { return config.linear_key_head_dim; }
  uint64_t nv() const { return config.linear_num_value_heads; }
  uint64_t vd() const { return config.linear_value_head_dim; }
  uint64_t rows() const { return sequences * L; }
  bool chunkable() const { return kd() == 128 && vd() == 128; }
  uint64_t cost() const { return gdn_call_cost(path, rows(), nv(), kd(), vd()); }
  oracle::GdnDims dims() const;  // GdnDims::of(config, sequences, L)
  std::string describe() const;  // one line: every field, the seed included
};
void showValue(const GdnCase& c, std::ostream& os);

// The config of a GDN case (also for hand-written cases): nv = nk·gqa.
ModelConfig gdn_config(uint64_t nk, uint64_t kd, uint64_t nv, uint64_t vd, uint64_t kernel);

// A case: kd = vd = 128 in half of the cases (the chunked path in three of four of those, the
// recurrence forced in the rest), head sizes in [min_head_dim, max_head_dim] otherwise (16,
// 32, 64, 96 favoured); nk 1..max_key_heads, nv = nk·(1..max_gqa), kernel 2..4; sequences
// 1..max_sequences; L from favoured_L in half of the cases, else 1..max_L; α and β regimes
// (mixed favoured), parallel keys in one case in five, a zero state in one in four, the value
// scale 1 (or 2^±4 in one case in eight). Over the cap, the GQA ratio, then nk, then
// sequences, then L (halved, never to 0) are reduced until it fits. Every draw shrinks
// towards small dimensions and the mixed regimes.
rc::Gen<GdnCase> gdn_case(const GdnRanges& ranges);

oracle::GdnInputs gdn_inputs(const GdnCase& c);  // generate_gdn_inputs(dims, seed, profile)

// ---- Mamba-2 SSD ---------------------------------------------------------------------------

struct Mamba2Ranges {
  uint64_t max_sequences = 4;
  uint64_t max_L = 127;
  std::vector<uint64_t> favoured_L = {1, 63, 64, 65, 127};
  uint64_t max_heads = 8;
  uint64_t max_head_dim = 64;             // P
  uint64_t max_state = 128;               // N
  uint64_t cost_cap = uint64_t{1} << 23;  // mamba2_call_cost per case
  bool cap_chunked_cost = false;          // as GdnRanges
  bool many_streams = false;              // as GdnRanges
};
Mamba2Ranges ci_mamba2_ranges();
Mamba2Ranges full_mamba2_ranges();  // sequences up to 16, L up to 4096, H up to 32, 2^30

struct Mamba2Case {
  // mamba_num_heads H, mamba_head_dim P, ssm_state_size N, n_groups (H % n_groups = 0),
  // conv_kernel, rms_norm_eps; one mamba layer (hidden_size 64, vocab_size 16).
  ModelConfig config;
  uint64_t sequences = 1, L = 1;
  oracle::Mamba2Path path = oracle::Mamba2Path::chunked;
  oracle::Mamba2InputProfile profile;
  uint64_t seed = 0;

  uint64_t H() const { return config.mamba_num_heads; }
  uint64_t P() const { return config.mamba_head_dim; }
  uint64_t N() const { return config.ssm_state_size; }
  uint64_t ng() const { return config.n_groups; }
  uint64_t rows() const { return sequences * L; }
  uint64_t cost() const { return mamba2_call_cost(path, rows(), H(), P(), N(), ng()); }
  oracle::Mamba2Dims dims() const;
  std::string describe() const;
};
void showValue(const Mamba2Case& c, std::ostream& os);

ModelConfig mamba2_config(uint64_t H, uint64_t P, uint64_t N, uint64_t ng, uint64_t kernel);

// A case: H 1..max_heads, n_groups a divisor of H (1 and H favoured), P (16, 64 favoured) and N
// (16, 64, 128 favoured) up to their maxima, kernel 2..4; sequences and L as GDN's; the
// chunked path in three cases of four; the dt regime (typical favoured, large, tiny), a zero
// state in one case in four, x scale 1 (or 2^±4 in one case in eight). Over the cap, H (with
// n_groups kept a divisor), then P and N, then sequences, then L are reduced until it fits.
rc::Gen<Mamba2Case> mamba2_case(const Mamba2Ranges& ranges);

oracle::Mamba2Inputs mamba2_inputs(const Mamba2Case& c);

const char* to_string(oracle::GdnPath p);
const char* to_string(oracle::Mamba2Path p);
const char* to_string(oracle::GdnGateRegime r);
const char* to_string(oracle::Mamba2DtRegime r);

}  // namespace bufferlab::gen
