// The ops of a routed MoE FFN (docs/spec/numerics.md §2, docs/spec/buffers.md §3 #6–#9, #16–#19,
// §4.1–§4.4, §5): router GEMM, top-k selection (softmax / sigmoid+bias / sqrtsoftplus+bias, hash),
// the gather of each token's input rows by expert, the grouped expert GEMMs, and the weighted
// combine (with zero-expert identity terms). Every operand is derived by make() from the
// config and the pass's rows; kernels launch from shape().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/tensor_ref.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// Where the top-k outputs of a pass of `rows` rows live inside `scratch`: ids u32
// [rows·top_k] at 0, weights f32 [rows·top_k] at 4·rows·top_k (§4.1–§4.3b; the moe region
// of §4.4 starts at 0 too). Offsets follow the pass's rows, never m.
struct TopKRegions {
  uint64_t ids_offset = 0, ids_bytes = 0;
  uint64_t weights_offset = 0, weights_bytes = 0;
  uint64_t end() const { return weights_offset + weights_bytes; }
};
TopKRegions topk_regions(uint64_t rows, uint64_t top_k);  // checked

// The router GEMM's precision path (docs/spec/buffers.md §5 "Paths", docs/spec/numerics.md §2).
enum class RouterPrecision { bf16, fp32_gate, fp32_routing };
const char* to_string(RouterPrecision p);

// logits[T, E'] = x[T, h] · Wgᵀ, E' = E + zero_expert_num, FP32 accumulate. bf16: x =
// norm_output, store BF16 → gate_logits; fp32_gate: x = norm_output, store FP32 →
// gate_logits_f32; fp32_routing: x = moe_router_in_f32 (FP32), store FP32 → gate_logits_f32.
struct MoeRouterOp {
  struct Shape {
    uint64_t rows = 0, hidden = 0, experts = 0;  // experts = E + zero_expert_num
  };
  Shape dims;
  RouterPrecision precision = RouterPrecision::bf16;
  TensorRef input, weight, logits;
  std::string input_value, logits_value = "router_logits";

  static MoeRouterOp make(const ModelConfig& config, uint64_t rows, RouterPrecision precision);

  // Operand addresses in a workspace, each checked against shape(): x_bf16 on the bf16 and
  // fp32_gate paths, x_f32 on fp32_routing; logits_bf16 on bf16, logits_f32 otherwise.
  struct Bound {
    const uint16_t* x_bf16 = nullptr;
    const float* x_f32 = nullptr;
    const uint16_t* weight = nullptr;  // [experts, hidden]
    uint16_t* logits_bf16 = nullptr;   // [rows, experts]
    float* logits_f32 = nullptr;       // [rows, experts]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "moe_router"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The largest expert count (E + zero experts) and top_k a top-k kernel must handle
// (docs/spec/numerics.md §2: up to 1024 scored experts, top_k ≤ 32). make() does not enforce them;
// backends refuse a launch beyond them with an Error.
inline constexpr uint64_t kMaxScoredExperts = 1024;
inline constexpr uint64_t kMaxTopK = 32;
// Router groups hold at least two experts each (docs/spec/numerics.md §2).
inline constexpr uint64_t kMaxRouterGroups = kMaxScoredExperts / 2;

// Per-call diagnostic of a top-k launch: keys that were NaN (a NaN logit, or a NaN bias) —
// ranked below every number by definition (oracle/routing.h) and counted here.
struct TopKDiagnostics {
  uint64_t nan_keys = 0;
};

enum class MoeScoring { softmax, sigmoid, sqrtsoftplus };
MoeScoring moe_scoring_from_string(const std::string& s);  // throws Error
const char* to_string(MoeScoring s);

// Top-k selection over the E' logits of every row (ties to the lower index), writing ids and
// weights in selection order into scratch (topk_regions). sigmoid / sqrtsoftplus select by
// s + bias when use_routing_bias (bias f32 [E'] in the weight pool). Hash layers select
// tid2eid[token_id] (i32 [vocab, top_k], weight pool) reading token_ids, and take the weights
// from the scoring of the selected logits.
//
// Group-limited routing (groups = G > 1, DeepSeek-V3 noaux_tc; docs/spec/numerics.md §2): the E'
// experts (no zero experts then) form G equal consecutive groups; a group's score is the FP32 sum
// of its two best keys (larger first); the topk_groups best groups under the total order (score
// descending, group index ascending; a NaN score last) are kept and top_k is selected among
// their experts only. Weights as without groups.
struct MoeTopKOp {
  struct Shape {
    uint64_t rows = 0, experts = 0, routed_experts = 0, top_k = 0;
    uint64_t vocab = 0;  // rows of tid2eid (hash layers), else 0
  };
  Shape dims;
  MoeScoring scoring = MoeScoring::softmax;
  bool norm_topk_prob = false, use_bias = false, hash = false;
  double routed_scaling_factor = 1.0;
  uint64_t groups = 1, topk_groups = 1;  // router groups G and kept groups g (1, 1: none)
  bool grouped() const { return groups > 1; }
  uint64_t group_size() const { return dims.experts / groups; }
  // "" when the group fields fit the shape (G divides E', E'/G ≥ 2, 1 ≤ g ≤ G, top_k ≤ g·E'/G,
  // no groups on hash layers), else what is wrong: backends and the oracle refuse such an op.
  std::string group_error() const;
  TensorRef logits, bias, token_ids, tid2eid, ids, weights;
  std::string logits_value = "router_logits", ids_value = "topk_ids",
              weights_value = "topk_weights";

  // logits_f32: the logits come from gate_logits_f32 (FP32-gate and FP32-routing paths).
  static MoeTopKOp make(const ModelConfig& config, uint64_t rows, bool logits_f32, bool hash);

  // logits_bf16 or logits_f32 (whichever `logits` is); bias only when use_bias; token_ids
  // and tid2eid only for hash layers.
  struct Bound {
    const uint16_t* logits_bf16 = nullptr;
    const float* logits_f32 = nullptr;
    const float* bias = nullptr;          // [experts]
    const uint32_t* token_ids = nullptr;  // [rows]
    const int32_t* tid2eid = nullptr;     // [vocab, top_k]
    uint32_t* ids = nullptr;              // [rows, top_k]
    float* weights = nullptr;             // [rows, top_k]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return hash ? "moe_topk_hash" : "moe_topk"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// The expert input x [T, D] (D = moe_input_size): ssm_ba (the latent, docs/spec/buffers.md §5) for
// latent MoE, else norm_output.
TensorRef moe_expert_input(const ModelConfig& config, uint64_t rows);

// Groups every token's input row by its selected experts: gathered [T·top_k, D] bf16 in
// expert_down_out (docs/spec/buffers.md §5: gathered rows live there before the down projection
// writes it). The grouping (expert row ranges) is recomputed from the ids by every grouped kernel;
// no index map is stored.
//
// THE gather order (every backend and the oracle): a slot s = t·top_k + j whose id is a
// routed expert (id < experts) goes to gathered row
//     offset(id) + #{slots s' < s with the same id},   offset(e) = #{slots with id < e};
// i.e. rows sorted by expert, then by slot. Slots of zero experts (id ≥ experts) are not
// gathered; gathered rows past the routed-slot count are left untouched. An id ≥ the op's
// E' (a corrupt id) is an error the kernel reports, never an out-of-range read.
struct MoeGatherOp {
  struct Shape {
    uint64_t rows = 0, top_k = 0, width = 0, experts = 0;
  };
  Shape dims;
  TensorRef input, ids, gathered;
  std::string input_value = "norm", ids_value = "topk_ids", gathered_value = "moe_gathered";

  static MoeGatherOp make(const ModelConfig& config, uint64_t rows);

  struct Bound {
    const uint16_t* input = nullptr;  // [rows, width]
    const uint32_t* ids = nullptr;    // [rows, top_k]
    uint16_t* gathered = nullptr;     // [rows·top_k, width]; the first `routed slots` rows
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "moe_gather"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

// One grouped BF16 expert GEMM (FP32 accumulate), expert of each slice from the ids:
// gate/up: gathered [T·top_k, D] · W[e]ᵀ ([E, I, D]) → expert_gate_out / expert_up_out rows
//          [T][top_k·I] (token-major, one slice per selected expert, docs/spec/numerics.md §2);
// down:    expert_gate_out [T][top_k·I] (the activation) · W[e]ᵀ ([E, D, I]) →
//          expert_down_out [T·top_k, D].
enum class ExpertProj { gate, up, down };
const char* to_string(ExpertProj p);

struct MoeExpertGemmOp {
  struct Shape {
    uint64_t rows = 0, top_k = 0, experts = 0, K = 0, N = 0;  // per-slice K and N
  };
  Shape dims;
  ExpertProj proj = ExpertProj::gate;
  TensorRef input, ids, weight, output;
  std::string input_value, ids_value = "topk_ids", output_value;

  static MoeExpertGemmOp make(const ModelConfig& config, uint64_t rows, ExpertProj proj);

  // gate/up: input = gathered rows (gather order above), output = token-major slices, slice
  // (t, j) written only where ids[t·top_k + j] is a routed expert. down: input slice (t, j)
  // of expert_gate_out, output row t·top_k + j, again only for routed slots. gate/up write
  // the other slots' slices as zeros: SwiGLU runs over every slot and must not read bytes no
  // step wrote (a cuda-sim finding, docs/findings.md).
  struct Bound {
    const uint16_t* input = nullptr;
    const uint32_t* ids = nullptr;     // [rows, top_k]
    const uint16_t* weight = nullptr;  // [experts, N, K]
    uint16_t* output = nullptr;
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const;
  std::string params() const;
  std::vector<Access> accesses() const;
};

// out[t] = Σ_j w[t,j] · down[t·top_k + j] over the selected routed experts, plus w[t,j] ·
// x[t] for every selected zero expert (ids E..E'-1; never selected in hash layers, which
// clamp ids ≥ E to 0). out [T, D]: moe_output, or ssm_ba in place of the latent input for
// latent MoE (the latent up-projection then writes moe_output).
struct MoeCombineOp {
  struct Shape {
    uint64_t rows = 0, top_k = 0, experts = 0, zero_experts = 0, width = 0;
  };
  Shape dims;
  bool reads_input = false;  // zero experts can be selected
  TensorRef ids, weights, down, input, output;
  std::string ids_value = "topk_ids", weights_value = "topk_weights", down_value = "expert_down",
              input_value = "norm", output_value = "@block_out";

  static MoeCombineOp make(const ModelConfig& config, uint64_t rows, bool hash);

  // input is null unless reads_input; for latent MoE output == input (in place: a kernel
  // reads a row's input before writing that row).
  struct Bound {
    const uint32_t* ids = nullptr;    // [rows, top_k]
    const float* weights = nullptr;   // [rows, top_k]
    const uint16_t* down = nullptr;   // [rows·top_k, width]
    const uint16_t* input = nullptr;  // [rows, width]
    uint16_t* output = nullptr;       // [rows, width]
  };
  Bound bind(const Workspace& ws) const;
  const Shape& shape() const { return dims; }
  std::string name() const { return "moe_combine"; }
  std::string params() const;
  std::vector<Access> accesses() const;
};

}  // namespace bufferlab
