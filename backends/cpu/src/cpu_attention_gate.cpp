// The sigmoid output gate of gated attention (ops/attention.h "Gate", docs/spec/attention.md
// §4): attn_output ⊙= sigmoid(gate) in place, y = bf16(a · (1 / (1 + expf(−g)))), the gate read
// from the gate columns of each qkv_output row. OpenMP over (row, head) items.
#include <cmath>

#include "cpu_attention_common.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {

void attn_gate(const Workspace& ws, const AttnGateOp& op, Mutant /*mutant*/) {
  const AttnGateOp::Bound b = op.bind(ws);
  const AttnGateOp::Shape& s = op.shape();
  const uint64_t hd = s.hd, nq = s.nq;
  attn::for_each_item(s.rows * nq, hd * 8, [&](uint64_t item) {
    const uint64_t r = item / nq, q = item % nq;
    const uint16_t* gate = b.qkv + r * s.qkv_dim + s.gate_col0 + q * hd;
    uint16_t* a = b.attn + (r * nq + q) * hd;
    for (uint64_t d = 0; d < hd; ++d) {
      const float sig = 1.0f / (1.0f + std::exp(-attn::bf16(gate[d])));
      a[d] = f32_to_bf16_bits(attn::bf16(a[d]) * sig);
    }
  });
}

}  // namespace bufferlab::cpu
