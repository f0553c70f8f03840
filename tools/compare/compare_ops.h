// The op runners of `bufferlab compare` beyond rmsnorm: router, top-k (router → top-k),
// the routed experts, the LM head, the mHC ops (compare_mhc.cpp) and the SSM mixers GDN and
// Mamba-2 SSD (compare_gdn_mamba2.cpp). Each runs on a backend over the model's real arena
// (BufferSizes::from_config at max_batch_tokens = --tokens; gdn / ssd: streams·tokens, sizing
// corrected), judges every stage against the FP64 oracle on the backend's own stored inputs,
// and returns the report plus what the op adds to it (the first token whose top-k selection
// differs, the experts that got weights).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/mamba2.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_inputs.h"

namespace bufferlab::cli {

// A typed option value and its spelling on the command line (the re-run line echoes it).
template <class T>
struct Given {
  T value{};
  std::string text;
};

// --path of gdn / ssd.
enum class GdnMamba2Path { auto_path, chunked, recurrent };

// The options of the mHC ops (compare_mhc.cpp), parsed; nullopt = not given (the default).
struct MhcCompareOptions {
  std::optional<Given<double>> logit_range;            // --logit-range L: hc-pre, hc-post (4)
  std::optional<oracle::MhcStreamMagnitude> streams;   // --streams: default normal
  std::optional<Given<double>> hc_eps;                 // --hc-eps E: default the model's
  std::optional<oracle::MhcLowRankPath> lowrank_path;  // --path split | slab: hc-lowrank
};

// The options of the SSM ops gdn and ssd (compare_gdn_mamba2.cpp), parsed; nullopt = not given.
struct GdnMamba2CompareOptions {
  std::optional<Given<uint64_t>> streams;  // --streams N >= 1: sequences of --tokens each (1)
  std::optional<GdnMamba2Path> path;       // --path chunked | recurrent | auto (default auto)
  std::optional<oracle::GdnGateRegime> alpha, beta;  // gdn: default mixed
  bool parallel_keys = false;                        // --parallel-keys (gdn)
  bool zero_state = false;                           // --zero-state: fresh sequences
  std::optional<oracle::Mamba2DtRegime> dt;          // ssd: default typical
};

// --layer of attn-prefill / attn-decode.
enum class AttnLayerKind { full, sliding };

// The options of the attention ops (compare_attention.cpp), parsed; nullopt = not given.
struct AttnCompareOptions {
  std::optional<Given<uint64_t>> streams;  // --streams N: co-dispatched sequences (prefill)
  std::optional<Given<uint64_t>> context;  // --context C: keys already in each sequence's cache
  std::optional<Given<uint64_t>> chunk;    // --chunk C: prefill in chunks of C tokens
  std::optional<AttnLayerKind> layer;      // --layer full | sliding (default: the first layer's)
};

// The names the CLI spells these values with.
const char* to_string(GdnMamba2Path p);
const char* to_string(oracle::GdnGateRegime r);
const char* to_string(oracle::Mamba2DtRegime r);
const char* to_string(oracle::MhcStreamMagnitude m);
const char* to_string(AttnLayerKind k);

// The mHC and SSM options as given on the command line (empty = not given), for parsing.
struct RawCompareOptions {
  std::string logit_range, hc_streams, hc_eps, lowrank_path;
  std::string ssm_streams, ssm_path, alpha, beta, dt;
  std::string context, chunk, layer;  // attention ops
  bool parallel_keys = false, zero_state = false;
};

// Refuses (Error) an mHC / SSM option given for an op that does not read it (it would be
// ignored); the ops reading each come from the compare table.
void require_options_apply(const std::string& op, const RawCompareOptions& raw);
// Parses the options given; the errors name the option and the value.
MhcCompareOptions parse_mhc_options(const RawCompareOptions& raw);
GdnMamba2CompareOptions parse_gdn_mamba2_options(const RawCompareOptions& raw);
AttnCompareOptions parse_attn_options(const RawCompareOptions& raw);
// The mHC / SSM options given, for the re-run line: " --streams 3 --path chunked ...".
std::string hc_rerun_options(const MhcCompareOptions& options);
std::string ssm_rerun_options(const GdnMamba2CompareOptions& options);
std::string attn_rerun_options(const AttnCompareOptions& options);

struct CompareSetup {
  ModelConfig config;
  std::string model_label;
  uint64_t tokens = 0;
  uint64_t seed = 0;
  Layout layout;         // the model's arena at max_batch_tokens = tokens
  std::string path;      // router path: bf16 | fp32-gate | fp32-routing
  std::string pattern;   // router inputs: random | near-ties | ... (routing_generators.h)
  bool hash = false;     // a hash-routing layer (models with num_hash_layers > 0)
  std::string dump_dir;  // empty: no dump

  Mutant mutant = Mutant::none;  // the kernel mutant on the backend, or the sizing mutant B15
  MhcCompareOptions hc;          // mHC ops only
  GdnMamba2CompareOptions ssm;   // gdn and ssd only
  AttnCompareOptions attn;       // attn-prefill and attn-decode only
};

struct CompareResult {
  oracle::AgreementReport report;
  std::string header;         // one line: what ran, arena and pool sizes
  std::string details;        // printed after the report's table, before its verdict (may be empty)
  nlohmann::json extra_json;  // merged into --json output
  uint64_t weight_pool_bytes = 0;
  // Verifier findings on the workspace that stopped the run before the op ran (gdn, ssd: a
  // real layout too short for the op, e.g. under the sizing mutant B15). Non-empty: the
  // report is empty, the findings are printed in its place and the compare fails (exit 1).
  std::vector<std::string> findings;
};

CompareResult compare_router(Backend& backend, const CompareSetup& s);
CompareResult compare_topk(Backend& backend, const CompareSetup& s);
CompareResult compare_experts(Backend& backend, const CompareSetup& s);
CompareResult compare_lm_head(Backend& backend, const CompareSetup& s);

// mHC hyper-connection ops (compare_mhc.cpp): hc-pre (Sinkhorn form), hc-post, hc-head,
// hc-expand, hc-lowrank (the low-rank pre step on its split or slab GEMM path).
CompareResult compare_mhc_pre(Backend& backend, const CompareSetup& s);
CompareResult compare_mhc_post(Backend& backend, const CompareSetup& s);
CompareResult compare_mhc_head(Backend& backend, const CompareSetup& s);
CompareResult compare_mhc_expand(Backend& backend, const CompareSetup& s);
CompareResult compare_mhc_lowrank(Backend& backend, const CompareSetup& s);

// The SSM mixers (compare_gdn_mamba2.cpp): gdn — Gated DeltaNet conv1d -> gates -> chunked core
// (wu, state, output) or the recurrence -> gated norm, over --streams co-dispatched sequences
// of --tokens each; ssd — Mamba-2 conv1d -> chunked SSD (cumsum, bmm, scan) per sequence or
// the recurrence -> gated norm.
CompareResult compare_gdn(Backend& backend, const CompareSetup& s);
CompareResult compare_mamba2(Backend& backend, const CompareSetup& s);

// Grouped-query attention (compare_attention.cpp): attn-prefill — staging (qk_norm, RoPE),
// cache write, the varlen core over the cached prefix (--context) and the chunk, the gate, over
// --streams sequences of --tokens each, optionally in --chunk pieces; attn-decode — --tokens
// decode rows of --context cached keys: cache write, core (split-K + merge or one split),
// gate. --layer full | sliding.
CompareResult compare_attn_prefill(Backend& backend, const CompareSetup& s);
CompareResult compare_attn_decode(Backend& backend, const CompareSetup& s);

// The checks before a runner allocates (compare_checks.cpp). Every arena tensor of `accesses`
// must lie inside the buffer the sizing gave it; saying so up front names the sizing instead
// of failing later inside a transfer.
void require_footprint_fits(const std::string& params, const std::vector<Access>& accesses,
                            const Layout& layout, const std::string& model_label, uint64_t tokens);
// Refuses (Error, with the estimate) a run whose host memory — `held` times `weight_bytes` —
// or oracle multiply-adds exceed what this machine affords.
void require_affordable(const std::string& what, double weight_bytes, double held,
                        double oracle_macs, const CompareSetup& s);

}  // namespace bufferlab::cli
