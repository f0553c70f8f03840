// The op runners of `bufferlab compare` beyond rmsnorm: router, top-k (router → top-k),
// the routed experts, the LM head, the mHC ops (compare_mhc.cpp) and the SSM mixers GDN and
// Mamba-2 SSD (compare_ssm.cpp). Each runs on a backend over the model's real arena
// (BufferSizes::from_config at max_batch_tokens = --tokens; gdn / ssd: streams·tokens, sizing
// corrected), judges every stage against the FP64 oracle on the backend's own stored inputs,
// and returns the report plus what the op adds to it (the first token whose top-k selection
// differs, the experts that got weights).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/oracle/agreement_report.h"

namespace bufferlab::cli {

// The options of the mHC ops (compare_mhc.cpp), as given; empty = not given (the default).
struct HcCompareOptions {
  std::string logit_range;   // --logit-range L: hc-pre, hc-post (default 4)
  std::string streams;       // --streams normal | zero | huge: ops reading streams (default normal)
  std::string hc_eps;        // --hc-eps E: hc-pre, hc-head (default: the model's hc_eps)
  std::string lowrank_path;  // --path split | slab: hc-lowrank (default: by the token count)
};

// The options of the SSM ops gdn and ssd (compare_ssm.cpp), as given; empty = not given.
struct SsmCompareOptions {
  std::string streams;         // --streams N: sequences of --tokens each (default 1)
  std::string path;            // --path chunked | recurrent | auto (default auto)
  std::string alpha, beta;     // --alpha, --beta (gdn): mixed | near-zero | near-one
  bool parallel_keys = false;  // --parallel-keys (gdn)
  bool zero_state = false;     // --zero-state: fresh sequences (state and conv tails zero)
  std::string dt;              // --dt (ssd): typical | large | tiny
};

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

  std::string mutant = "none";  // the kernel mutant active on the backend
  HcCompareOptions hc;          // mHC ops only
  SsmCompareOptions ssm;        // gdn and ssd only
};

struct CompareResult {
  oracle::AgreementReport report;
  std::string header;         // one line: what ran, arena and pool sizes
  std::string details;        // printed after the report (may be empty)
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
CompareResult compare_hc_pre(Backend& backend, const CompareSetup& s);
CompareResult compare_hc_post(Backend& backend, const CompareSetup& s);
CompareResult compare_hc_head(Backend& backend, const CompareSetup& s);
CompareResult compare_hc_expand(Backend& backend, const CompareSetup& s);
CompareResult compare_hc_lowrank(Backend& backend, const CompareSetup& s);
// Error when an mHC option is given for an op that does not use it (it would be ignored).
void require_hc_options_apply(const std::string& op, const HcCompareOptions& options);

// The SSM mixers (compare_ssm.cpp): gdn — Gated DeltaNet conv1d -> gates -> chunked core
// (wu, state, output) or the recurrence -> gated norm, over --streams co-dispatched sequences
// of --tokens each; ssd — Mamba-2 conv1d -> chunked SSD (cumsum, bmm, scan) per sequence or
// the recurrence -> gated norm.
CompareResult compare_gdn(Backend& backend, const CompareSetup& s);
CompareResult compare_ssd(Backend& backend, const CompareSetup& s);
// Error when a gdn / ssd option is given for an op that does not use it.
void require_ssm_options_apply(const std::string& op, const SsmCompareOptions& options);
inline bool is_ssm_op(const std::string& op) { return op == "gdn" || op == "ssd"; }
// The gdn / ssd options given, for the re-run line: " --streams 3 --path chunked ...".
std::string ssm_rerun_options(const SsmCompareOptions& options);

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
