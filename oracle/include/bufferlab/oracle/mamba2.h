// FP64 oracle of Mamba-2 (docs/spec/numerics.md §6, ops/mamba2.h pins the layouts): the inputs of
// one call, seeded input generation, and the references — the definition (the recurrence in
// FP64), the chunked SSD in FP64 (the identity the tests assert at 1e-12) and the whole call
// in `exact` / `faithful` mode. Stage references and bounds, used by the judge
// (mamba2_judge.h), are declared in mamba2_stages.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// One Mamba-2 call: `sequences` equal-length sequences of L tokens, back to back in the rows;
// the chunked SSD runs them one after another (§4.6), conv1d and the gated norm over all rows.
struct Mamba2Dims {
  Mamba2Geometry geom;  // H, P, N, ng, G, kernel, d_inner, d_xbc, in_proj
  uint64_t sequences = 1, L = 0;
  double eps = 1e-6;

  uint64_t rows() const { return sequences * L; }
  // Error: not a Mamba-2 config, n_groups = 0, H % G ≠ 0, sequences or L = 0.
  static Mamba2Dims of(const ModelConfig& config, uint64_t sequences, uint64_t L);
};

struct Mamba2Inputs {
  std::vector<uint16_t> zxbcdt;      // bf16 [rows, in_proj]: [z | xBC | dt_raw]
  std::vector<uint16_t> conv_w;      // bf16 [d_xbc, kernel]
  std::vector<uint16_t> conv_b;      // bf16 [d_xbc]
  std::vector<float> a_log;          // f32 [H]
  std::vector<float> dt_bias;        // f32 [H]
  std::vector<float> D;              // f32 [H]
  std::vector<uint16_t> norm_w;      // bf16 [d_inner]
  std::vector<uint16_t> conv_state;  // bf16 [sequences, d_xbc, K − 1]
  std::vector<float> state;          // f32 [sequences, H, P, N]
};

// dt regimes of the generator: softplus(dt_raw + dt_bias) ≈ 0.001..0.1 (typical), up to ~50
// (large: exp(dt·A) underflows, the clamps and the ≤ 0 exponents bite), or below 1e-6 (tiny).
enum class Mamba2DtRegime { typical, large, tiny };

struct Mamba2InputProfile {
  Mamba2DtRegime dt = Mamba2DtRegime::typical;
  bool zero_state = false;
  double x_scale = 1.0;
};

Mamba2Inputs generate_mamba2_inputs(const Mamba2Dims& dims, uint64_t seed,
                                    const Mamba2InputProfile& profile = {});
// Sequence b alone (sequences = 1).
Mamba2Inputs mamba2_sequence(const Mamba2Dims& dims, const Mamba2Inputs& in, uint64_t b);
// Tokens [t0, t1) of a one-sequence call with the given carried conv tail bf16 [d_xbc, K−1]
// and state f32 [H, P, N].
Mamba2Inputs mamba2_token_range(const Mamba2Dims& dims, const Mamba2Inputs& in, uint64_t t0,
                                uint64_t t1, std::span<const uint16_t> conv_state,
                                std::span<const float> state);

// The SSD core of docs/spec/numerics.md §6 in FP64 for ONE sequence from given xBC [L, d_xbc]
// (after the conv), dt [L, H] (after softplus and clamp), A [H] (negative), D [H], state [H, P, N]:
// y [L, d_inner] (before the gated norm) and the state after.
struct Mamba2CoreResult {
  std::vector<double> y;
  std::vector<double> state;
};
Mamba2CoreResult mamba2_recurrence_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                        std::span<const double> dt, std::span<const double> A,
                                        std::span<const double> D, std::span<const double> state);
Mamba2CoreResult mamba2_chunked_fp64(const Mamba2Dims& dims, std::span<const double> xbc,
                                     std::span<const double> dt, std::span<const double> A,
                                     std::span<const double> D, std::span<const double> state);

// The whole call. `exact`: FP64, the recurrence. `faithful`: the chunked SSD rounded where the
// backend stores BF16 (the conv output xBC, y, the normed output), FP64 elsewhere.
struct Mamba2Reference {
  std::vector<double> xbc;         // [rows, d_xbc]
  std::vector<double> conv_state;  // [sequences, d_xbc, K − 1]
  std::vector<double> dt;          // [rows, H]
  std::vector<double> y;           // [rows, d_inner]
  std::vector<double> normed;      // [rows, d_inner]
  std::vector<double> state;       // [sequences, H, P, N]
};
Mamba2Reference mamba2_reference(const Mamba2Dims& dims, const Mamba2Inputs& in, Mode mode);

}  // namespace bufferlab::oracle
