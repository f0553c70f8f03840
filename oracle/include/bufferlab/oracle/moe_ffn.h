// FP64 oracle of the non-routing MoE / FFN ops (docs/spec/numerics.md §2, §8): the gather of token
// rows by expert, the grouped expert GEMMs (gate / up / down), SwiGLU, the weighted combine
// (zero-expert identity terms, latent in place), the BF16 GemmOp kinds (store, swiglu
// epilogue, accumulate) and the LM head — each with the derived per-element bound of a
// backend's stored value against the faithful oracle (derivations next to each op in
// moe_ffn.cpp). Host copies of the operands carry BF16 as raw bits.
//
// Modes: `exact` returns the FP64 definition, unrounded; `faithful` rounds the result to BF16
// where the backends store it (round to nearest even, straight from FP64). The chain oracle
// (expert_chain) rounds every stored stage in faithful mode and none in exact mode.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/moe.h"
#include "bufferlab/core/ops/projection.h"
#include "bufferlab/oracle/bounds.h"
#include "bufferlab/oracle/mode.h"
#include "bufferlab/oracle/routing.h"

namespace bufferlab::oracle {

// One op's oracle result over its output tensor, row-major [rows, cols]: the value, the
// per-element absolute bound of the backend's stored value against the FAITHFUL value, and
// which elements the op writes (mask empty = all; unwritten elements hold value 0, bound 0).
struct OpReference {
  std::vector<double> value;
  std::vector<double> bound;
  std::vector<uint8_t> mask;
  uint64_t cols = 0;
  std::string formula;  // how `bound` was derived, for the report
};

// What a perfect backend stores for `ref` (faithful values): the BF16 bits of each value,
// the poison pattern 0xFFFF where the op writes nothing. The judges' self-check and the
// planted-bug tests start from it.
std::vector<uint16_t> perfect_bf16_output(const OpReference& ref);

// ---- Gather (THE gather order of moe.h) ----

// The gathered row of every slot s = t·top_k + j: offset(id) + #{s' < s with the same id},
// −1 for a zero-expert slot (id ≥ experts). Error for an id ≥ experts + zero_experts.
std::vector<int64_t> gather_order(std::span<const uint32_t> ids, uint64_t experts,
                                  uint64_t zero_experts);
uint64_t routed_slots(std::span<const uint32_t> ids, uint64_t experts);

struct GatherInputs {
  std::vector<uint16_t> input;  // [rows, width]
  std::vector<uint32_t> ids;    // [rows, top_k]
};
// gathered [rows·top_k, width]: rows < routed_slots(ids) written (a copy: bound 0).
OpReference moe_gather(const MoeGatherOp& op, const GatherInputs& in, uint64_t zero_experts);

// ---- Expert GEMMs ----

struct ExpertGemmInputs {
  std::vector<uint16_t> input;   // gate/up: gathered [rows·top_k, K]; down: act [rows, top_k·K]
  std::vector<uint32_t> ids;     // [rows, top_k]
  std::vector<uint16_t> weight;  // [experts, N, K]
};
// gate/up: [rows, top_k·N] token-major slices; down: [rows·top_k, N]. Routed slots only.
OpReference moe_expert_gemm(const MoeExpertGemmOp& op, const ExpertGemmInputs& in, Mode mode,
                            const BoundModel& bm, uint64_t zero_experts);

// ---- SwiGLU ----

struct SwigluInputs {
  std::vector<uint16_t> gate;  // [rows, width]
  std::vector<uint16_t> up;    // [rows, width]
};
OpReference swiglu(const SwigluOp& op, const SwigluInputs& in, Mode mode, const BoundModel& bm);

// ---- Combine ----

struct CombineInputs {
  std::vector<uint32_t> ids;    // [rows, top_k]
  std::vector<float> weights;   // [rows, top_k]
  std::vector<uint16_t> down;   // [rows·top_k, width]
  std::vector<uint16_t> input;  // x [rows, width] (read for zero experts; latent: also out)
};
OpReference moe_combine(const MoeCombineOp& op, const CombineInputs& in, Mode mode,
                        const BoundModel& bm);

// ---- BF16 GemmOp kinds ----

struct GemmInputs {
  std::vector<uint16_t> x;        // [rows, K]
  std::vector<uint16_t> weight;   // [N, K]
  std::vector<uint16_t> out_old;  // [rows, N]: up (swiglu) or the accumulator; else empty
};
OpReference gemm(const GemmOp& op, const GemmInputs& in, Mode mode, const BoundModel& bm);

// ---- LM head ----

struct LmHeadInputs {
  std::vector<uint16_t> input;  // [rows, hidden]
  std::vector<uint16_t> table;  // [vocab, hidden]
};
OpReference lm_head(const LmHeadOp& op, const LmHeadInputs& in, Mode mode, const BoundModel& bm);

// ---- The routed-expert chain gather → gate → up → swiglu → down → combine ----

struct ExpertChain {
  MoeGatherOp gather;
  MoeExpertGemmOp gate, up, down;
  SwigluOp act;
  MoeCombineOp combine;
  uint64_t zero_experts = 0;
  uint64_t weight_pool_bytes = 0;  // the three expert weights, placed one after another

  // The ops of emit_routed_experts for `rows` rows, weights placed in the pool.
  static ExpertChain make(const ModelConfig& config, uint64_t rows, bool hash);
  std::string params() const;
};

struct ExpertChainInputs {
  std::vector<uint16_t> x;  // [rows, D]
  std::vector<uint32_t> ids;
  std::vector<float> weights;
  std::vector<uint16_t> w_gate, w_up, w_down;  // [E, I, D], [E, I, D], [E, D, I]
};

// The chain's output [rows, D] from the original inputs. faithful: every stage rounded to
// BF16 where the backends store it (gate, up, act, down, out); exact: none rounded.
std::vector<double> expert_chain(const ExpertChain& chain, const ExpertChainInputs& in, Mode mode);

// ---- What a backend stored (harness output, judge input) ----
// `stored`: the op's inputs read back from the backend before the op ran (what it consumed);
// `out`: its output tensor after the op, poison where it wrote nothing.
template <class Inputs>
struct StageRun {
  Inputs stored;
  std::vector<uint16_t> out;
};
using GatherRun = StageRun<GatherInputs>;
using ExpertGemmRun = StageRun<ExpertGemmInputs>;
using SwigluRun = StageRun<SwigluInputs>;
using CombineRun = StageRun<CombineInputs>;
using GemmRun = StageRun<GemmInputs>;
using LmHeadRun = StageRun<LmHeadInputs>;
struct ExpertChainRun {
  GatherRun gather;
  ExpertGemmRun gate, up;
  SwigluRun act;
  ExpertGemmRun down;
  CombineRun combine;
};

// Oracle multiply-adds of one case, for the per-case cost cap (docs/architecture.md: ≤ ~2^26).
uint64_t expert_chain_cost(const ExpertChain& chain);  // T·top_k·3·I·D + T·top_k·D

}  // namespace bufferlab::oracle
