// FP64 oracle of Gated DeltaNet (docs/spec/numerics.md §5, ops/gdn.h pins the layouts): the inputs
// of one call, seeded input generation, and the references — the definition (token-by-token
// recurrence in FP64), the chunked algorithm in FP64 (the identity the tests assert at 1e-12)
// and the whole call in `exact` / `faithful` mode. Stage references and their bounds, used by
// the judge (gdn_judge.h), are declared in gdn_stages.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/oracle/mode.h"

namespace bufferlab::oracle {

// One GDN call: `sequences` equal-length sequences of L tokens each, back to back in the rows
// (sequences > 1 is a co-dispatched, kernel-batched prefill: B15's condition).
struct GdnDims {
  GdnGeometry geom;  // nk, kd, nv, vd, kernel, qkvz, conv_dim, value_dim
  uint64_t sequences = 1, L = 0;
  double eps = 1e-6;  // the gated norm's (the model's rms_norm_eps)

  uint64_t rows() const { return sequences * L; }
  bool chunkable() const { return geom.kd == 128 && geom.vd == 128; }  // docs/spec/numerics.md §5
  // Error: not a GDN config, sequences or L = 0, or sequences·L overflows.
  static GdnDims of(const ModelConfig& config, uint64_t sequences, uint64_t L);
};

// Everything one call reads, in the layouts of ops/gdn.h.
struct GdnInputs {
  std::vector<uint16_t> deint;       // bf16 [rows, qkvz]: [Q | K | V | Z]
  std::vector<uint16_t> ba;          // bf16 [rows, 2nv]: [b | a]
  std::vector<uint16_t> conv_w;      // bf16 [conv_dim, kernel]
  std::vector<float> a_log;          // f32 [nv]
  std::vector<float> dt_bias;        // f32 [nv]
  std::vector<uint16_t> norm_w;      // bf16 [vd]
  std::vector<uint16_t> conv_state;  // bf16 [sequences, conv_dim, kernel − 1]
  std::vector<float> state;          // f32 [sequences, nv, kd, vd]
};

// Gate regimes of the generator: α = exp(−exp(A_log)·softplus(a + dt_bias)) and β = σ(b).
enum class GdnGateRegime { mixed, near_zero, near_one };

struct GdnInputProfile {
  GdnGateRegime alpha = GdnGateRegime::mixed;  // near_zero reaches the 1e-30 floor
  GdnGateRegime beta = GdnGateRegime::mixed;
  bool parallel_keys = false;  // every key of a head within a few degrees of one direction
  bool zero_state = false;     // S and the conv tails start at zero (a fresh sequence)
  double value_scale = 1.0;    // V columns are normal-ish times this
};

// Seeded, identical on every platform (SplitMix64, exact arithmetic).
GdnInputs generate_gdn_inputs(const GdnDims& dims, uint64_t seed,
                              const GdnInputProfile& profile = {});

// Sequence b alone (dims.sequences = 1): its rows, conv tail and state.
GdnInputs gdn_sequence(const GdnDims& dims, const GdnInputs& in, uint64_t b);
// Tokens [t0, t1) of a one-sequence call, with the given starting states (the carried
// conv tail bf16 [conv_dim, K−1] and S f32 [nv, kd, vd]); weights shared.
GdnInputs gdn_token_range(const GdnDims& dims, const GdnInputs& in, uint64_t t0, uint64_t t1,
                          std::span<const uint16_t> conv_state, std::span<const float> state);

// The core of docs/spec/numerics.md §5 in FP64 from given conv outputs and gates (FP64, any head
// size): conv [rows, conv_dim] (Q | K | V before normalisation), gates [rows, nv, 2] (β, α), state
// [sequences, nv, kd, vd]. o [rows, nv·vd] before the gated norm; state after the call.
struct GdnCoreResult {
  std::vector<double> o;
  std::vector<double> state;
};
GdnCoreResult gdn_recurrence_fp64(const GdnDims& dims, std::span<const double> conv,
                                  std::span<const double> gates, std::span<const double> state);
// The chunked algorithm (chunk 64, W/U by forward substitution, state per chunk), FP64, no
// rounding anywhere: equal to the recurrence within 1e-12 (relative to the output scale).
GdnCoreResult gdn_chunked_fp64(const GdnDims& dims, std::span<const double> conv,
                               std::span<const double> gates, std::span<const double> state);

// The whole call from the inputs. `exact`: FP64 throughout, the recurrence. `faithful`: the
// backend's algorithm (chunked when chunkable(), else the recurrence) rounded where the
// backend stores BF16 (W, U, S, uc, the core output, the normed output), FP64 elsewhere.
struct GdnReference {
  std::vector<double> conv;        // [rows, conv_dim]
  std::vector<double> conv_state;  // [sequences, conv_dim, K − 1]
  std::vector<double> gates;       // [rows, nv, 2]
  std::vector<double> core;        // [rows, nv·vd] before the gated norm
  std::vector<double> normed;      // [rows, nv·vd]
  std::vector<double> state;       // [sequences, nv, kd, vd]
  // The chunked `faithful` path only (empty otherwise): the gdn_fla_scratch arrays as the
  // backend stores them, in GdnRun's region order — gc (FP64, not rounded: an FP32 store), W,
  // U, S (the BF16 snapshots), uc (BF16).
  std::vector<double> gc, W, U, S, uc;
};
GdnReference gdn_reference(const GdnDims& dims, const GdnInputs& in, Mode mode);

}  // namespace bufferlab::oracle
