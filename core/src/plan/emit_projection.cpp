// One projection on every path that applies to it (docs/spec/buffers.md §5 "Paths"): Q2 dequant
// or MMQ, the FP8 block-scaled path, BF16; then LoRA. Steps are appended in launch order.
#include "bufferlab/core/ops/projection.h"
#include "builder.h"

namespace bufferlab::plan::detail {
namespace {

bool lora_applies(ProjRole r) {
  switch (r) {
    case ProjRole::q:
    case ProjRole::k:
    case ProjRole::v:
    case ProjRole::qkv:
    case ProjRole::o:
    case ProjRole::gate:
    case ProjRole::up:
    case ProjRole::down:
      return true;
    default:
      return false;
  }
}

// Q2 covers the LoRA roles and the GDN input projection.
bool q2_applies(ProjRole r) { return lora_applies(r) || r == ProjRole::gdn_in; }

// The weight matrices a projection dequantizes one at a time (rows N each).
std::vector<uint64_t> q2_parts(const Ctx& c, const ProjectionSpec& p) {
  if (p.role != ProjRole::qkv) return {p.N};  // a grouped GEMM: every group at once
  const ModelConfig& m = c.config;
  return {(Size(m.q_proj_mul()) * m.num_attention_heads * m.head_dim).value(),
          (Size(2) * m.num_key_value_heads * m.head_dim).value()};
}

// Mutant B7: the co-dispatched streams' Q2 dequant + GEMM each on its own CUDA stream with
// no ordering between them (the engine's bug); later steps wait for all of them.
void emit_q2_dequant_per_stream(Builder& b, const Ctx& c, const ProjectionSpec& p) {
  const uint64_t n = c.pass.n, L = c.pass.L;
  std::vector<uint32_t> ends;
  const uint32_t fork = b.next_index() - 1;  // every side stream starts after the work so far
  const uint64_t wn = q2_parts(c, p).front();
  for (uint64_t s = 0; s < n; ++s) {
    const uint32_t stream = static_cast<uint32_t>(s + 1);
    b.add(Q2DequantOp::make(wn, p.K / p.groups, "q2_w"), stream, {fork});
    TensorRef x = p.input;
    x.offset += (Size(s) * L * p.K * 2).value();
    x.shape = {L, p.K};
    const uint64_t out_off = (Size(p.out_offset) + Size(s) * L * p.N * 2).value();
    GemmOp g = GemmOp::make(
        p.name, "q2-dequant",
        {rd(x, p.input_value),
         rd(arena(BufferId::q2_dequant_scratch, 0, {wn, p.K / p.groups}, DType::bf16), "q2_w")},
        L, L, p.K, p.N, p.out_buffer, out_off, DType::bf16, p.output_value);
    ends.push_back(b.add(g, stream));
  }
  b.add("join_streams", "join_streams(n=" + std::to_string(n) + ")", {}, 0, ends);
}

}  // namespace

void emit_projection(Builder& b, const Ctx& c, const ProjectionSpec& p) {
  const uint64_t T = c.T;
  const bool q2 = q2_applies(p.role) && c.paths.q2 != Q2Path::off;
  if (q2 && c.paths.q2 == Q2Path::dequant) {
    if (c.mutant(Mutant::B7) && c.pass.kind == PassKind::codispatch) {
      emit_q2_dequant_per_stream(b, c, p);
    } else {
      // A fused QKV is dequantized in two parts, Q then K+V: the scratch formula of
      // docs/spec/buffers.md §3
      // (#40) holds nq·q_proj_mul·hd and 2·nkv·hd rows, not their sum. Each part's GEMM
      // writes its columns of the fused output (footprint: the whole output).
      for (uint64_t part_n : q2_parts(c, p)) {
        b.add(Q2DequantOp::make(part_n, p.K / p.groups, "q2_w"));
        GemmOp g = GemmOp::make(
            p.name, "q2-dequant",
            {rd(p.input, p.input_value),
             rd(arena(BufferId::q2_dequant_scratch, 0, {part_n, p.K / p.groups}, DType::bf16),
                "q2_w")},
            T, T, p.K, p.N, p.out_buffer, p.out_offset, DType::bf16, p.output_value);
        g.dims.N = part_n;
        b.add(g);
      }
    }
  } else if (q2) {  // MMQ
    const Q8QuantOp q =
        Q8QuantOp::make(p.input, p.input_value, BufferId::q2_act_q8, "q2_act", T, p.K);
    b.add(q);
    b.add(GemmOp::make(p.name, "q2-mmq", {rd(q.output, "q2_act")}, T, T, p.K, p.N, p.out_buffer,
                       p.out_offset, DType::bf16, p.output_value));
  } else if (p.fp8_path && c.fp8()) {
    const Fp8QuantOp q = Fp8QuantOp::make(p.input, p.input_value, T, p.K);
    b.add(q);
    const uint64_t P = q.shape().padded_rows;
    b.add(GemmOp::make(p.name, "fp8", {rd(q.act, "fp8_act"), rd(q.scale, "fp8_act_scale")}, T, P,
                       p.K, p.N, p.out_buffer, p.out_offset, DType::bf16, p.output_value));
  } else {
    b.add(GemmOp::make(p.name, "bf16", {rd(p.input, p.input_value)}, T, T, p.K, p.N, p.out_buffer,
                       p.out_offset, DType::bf16, p.output_value));
  }

  const uint64_t rank = c.config.adapter_max_rank;
  if (!(c.paths.lora && rank > 0 && p.lora && lora_applies(p.role))) return;
  // Adapters belong to q, k and v separately (docs/spec/buffers.md §5 "LoRA": q, k, v, o, gate, up,
  // down): a fused QKV GEMM gets three adapters, each delta as wide as its own slice, each added
  // into its columns of the fused output (footprint: the whole output, the columns strided).
  const TensorRef y = arena(p.out_buffer, p.out_offset, {T, p.N}, DType::bf16);
  std::vector<std::pair<std::string, uint64_t>> slices = {{p.name, p.N}};
  if (p.role == ProjRole::qkv) {
    const ModelConfig& m = c.config;
    const uint64_t q = (Size(m.q_proj_mul()) * m.num_attention_heads * m.head_dim).value();
    const uint64_t kv = (Size(m.num_key_value_heads) * m.head_dim).value();
    slices = {{p.name + ".q", q}, {p.name + ".k", kv}, {p.name + ".v", kv}};
  }
  for (const auto& [label, N] : slices) {
    b.add(LoraOp::shrink(label, p.input, p.input_value, T, p.K, rank));
    b.add(LoraOp::expand(label, T, N, rank));
    b.add(LoraOp::add(label, y, p.output_value, T, N));
  }
}

}  // namespace bufferlab::plan::detail
