// The steps of a dense SwiGLU FFN sub-block: gate → expert_gate_out, up → expert_up_out
// [rows][intermediate_size], a = silu(g)·u in place of g, down → moe_output "@block_out"
// (docs/spec/numerics.md §2; docs/spec/buffers.md §5: dense FFN uses the expert buffers).
//
// Paths (docs/spec/buffers.md §5):
// - dense model (E = 0), Q2 off: the activation path c.paths.ffn_act — our own quantizer
//   (ffn_act_a / ffn_act_scale for fp8, int8, NVFP4; ffn_act_q8 for q8_1) and quantized
//   GEMMs; the same activation buffers hold x (K = h, quantized once for gate and up) and
//   then a (K = intermediate_size) for down. fp8/int8/NVFP4 GEMMs take ceil16(T) rows (padding
//   rows quantized as zeros) and write ceil16(T) output rows, rows ≥ T phantom; q8_1 (MMQ)
//   quantizes and writes T rows. LoRA (gate, up, down) is added after each GEMM.
// - Q2 on (dequant or MMQ): the FFN weights are Q2_0, so the Q2 path replaces the
//   activation path; each projection goes through emit_projection (role gate/up/down),
//   which models Q2 and LoRA. The ffn_act choice then changes nothing.
// - dense layers of MoE models (E > 0): BF16 path at width intermediate_size (docs/spec/buffers.md
// §1.1)
//   through emit_projection, which still applies Q2 and LoRA (gate/up/down of dense
//   layers; MoE experts never take LoRA).
#include <string>

#include "bufferlab/core/ops/ffn.h"
#include "bufferlab/core/ops/projection.h"
#include "builder.h"

namespace bufferlab::plan::detail {
namespace {

// The FFN's BF16 input x = norm_output [T, h] and its activation a = expert_gate_out
// [T, intermediate_size] (in place of the gate output).
struct FfnTensors {
  TensorRef x, act;
  uint64_t h = 0, inter = 0;
};

FfnTensors ffn_tensors(const Ctx& c) {
  const uint64_t h = c.config.hidden_size, I = c.config.intermediate_size;
  return {arena(BufferId::norm_output, 0, {c.T, h}, DType::bf16),
          arena(BufferId::expert_gate_out, 0, {c.T, I}, DType::bf16), h, I};
}

void emit_swiglu(Builder& b, const Ctx& c, const FfnTensors& t) {
  b.add(SwigluOp::make(c.T, t.inter, c.config.swiglu_limit, "ffn_gate", "ffn_up", "ffn_act"));
}

// BF16 / Q2 / LoRA: every projection through the lead's emit_projection.
void emit_via_projection(Builder& b, const Ctx& c, const FfnTensors& t) {
  auto proj = [&](const char* name, ProjRole role, const TensorRef& in, const char* in_value,
                  BufferId out, uint64_t K, uint64_t N, const char* out_value) {
    ProjectionSpec p;
    p.name = name;
    p.role = role;
    p.input = in;
    p.input_value = in_value;
    p.out_buffer = out;
    p.out_offset = 0;
    p.K = K;
    p.N = N;
    p.output_value = out_value;
    p.fp8_path = false;  // the projection-path axis does not apply to the FFN (§5)
    emit_projection(b, c, p);
  };
  proj("ffn_gate", ProjRole::gate, t.x, "norm", BufferId::expert_gate_out, t.h, t.inter,
       "ffn_gate");
  proj("ffn_up", ProjRole::up, t.x, "norm", BufferId::expert_up_out, t.h, t.inter, "ffn_up");
  emit_swiglu(b, c, t);
  proj("ffn_down", ProjRole::down, t.act, "ffn_act", BufferId::moe_output, t.inter, t.h,
       "@block_out");
}

// LoRA on a quantized-path projection: xa = x·Aᵀ → lora_xa, delta = xa·Bᵀ → lora_delta,
// y += scale·delta in place (docs/spec/numerics.md §7), from the BF16 input the GEMM quantized.
void emit_lora(Builder& b, const Ctx& c, const std::string& label, const TensorRef& x,
               const std::string& x_value, uint64_t K, const TensorRef& y,
               const std::string& y_value, uint64_t N) {
  const uint64_t rank = c.config.adapter_max_rank;
  if (!c.paths.lora || rank == 0) return;
  b.add(LoraOp::shrink(label, x, x_value, c.T, K, rank));
  b.add(LoraOp::expand(label, c.T, N, rank));
  b.add(LoraOp::add(label, y, y_value, c.T, N));
}

// The quantized activation x [T, K] → act buffers, and the reads of the GEMMs that consume
// it (gate and up share one quantization of x).
struct QuantizedAct {
  std::string kind;  // GEMM kind: "q8_1-mmq", "fp8", "int8", "nvfp4"
  std::vector<Access> reads;
  uint64_t rows = 0;  // rows the GEMM launches (and writes): T for MMQ, else ceil16(T)
  DType weight_dtype = DType::bf16;
};

QuantizedAct emit_quantize(Builder& b, const Ctx& c, const TensorRef& x, const std::string& x_value,
                           uint64_t K) {
  if (c.paths.ffn_act == FfnActPath::q8_1) {
    const Q8QuantOp q = Q8QuantOp::make(x, x_value, BufferId::ffn_act_q8, "ffn_act_q8", c.T, K);
    b.add(q);
    return {"q8_1-mmq", {rd(q.output, q.output_value)}, c.T, DType::u8};
  }
  const FfnActFormat f = c.paths.ffn_act == FfnActPath::fp8    ? FfnActFormat::fp8
                         : c.paths.ffn_act == FfnActPath::int8 ? FfnActFormat::int8
                                                               : FfnActFormat::nvfp4;
  const FfnActQuantOp q = FfnActQuantOp::make(x, x_value, c.T, K, f);
  b.add(q);
  return {to_string(f), q.gemm_reads(), q.dims.padded_rows, q.weight_dtype()};
}

// One quantized GEMM → out [T, N] (+ phantom rows up to the launched rows), then LoRA from
// the BF16 input x.
void emit_quantized_gemm(Builder& b, const Ctx& c, const QuantizedAct& q, const std::string& label,
                         const TensorRef& x, const std::string& x_value, uint64_t K, uint64_t N,
                         BufferId out, const std::string& out_value) {
  GemmOp g =
      GemmOp::make(label, q.kind, q.reads, c.T, q.rows, K, N, out, 0, DType::bf16, out_value);
  g.weight.dtype = q.weight_dtype;
  b.add(g);
  emit_lora(b, c, label, x, x_value, K, arena(out, 0, {c.T, N}, DType::bf16), out_value, N);
}

void emit_act_path(Builder& b, const Ctx& c, const FfnTensors& t) {
  const QuantizedAct qx = emit_quantize(b, c, t.x, "norm", t.h);
  emit_quantized_gemm(b, c, qx, "ffn_gate", t.x, "norm", t.h, t.inter, BufferId::expert_gate_out,
                      "ffn_gate");
  emit_quantized_gemm(b, c, qx, "ffn_up", t.x, "norm", t.h, t.inter, BufferId::expert_up_out,
                      "ffn_up");
  emit_swiglu(b, c, t);
  const QuantizedAct qa = emit_quantize(b, c, t.act, "ffn_act", t.inter);
  emit_quantized_gemm(b, c, qa, "ffn_down", t.act, "ffn_act", t.inter, t.h, BufferId::moe_output,
                      "@block_out");
}

}  // namespace

void emit_dense_ffn(Builder& b, const Ctx& c) {
  const FfnTensors t = ffn_tensors(c);
  // The activation path applies to dense models only (E = 0: ffn_act_* exist); Q2 weights
  // replace it.
  if (c.config.num_experts == 0 && c.paths.q2 == Q2Path::off) return emit_act_path(b, c, t);
  emit_via_projection(b, c, t);
}

}  // namespace bufferlab::plan::detail
