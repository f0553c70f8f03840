// The GDN references of oracle/gdn.h, composed from the stage references of gdn_stages.cpp:
// the definition (token recurrence), the chunked algorithm in FP64 (the same stages, nothing
// rounded), and the whole call in `exact` / `faithful` mode.
#include <algorithm>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/gdn.h"
#include "bufferlab/oracle/gdn_stages.h"
#include "oracle_common.h"

namespace bufferlab::oracle {

GdnCoreResult gdn_recurrence_fp64(const GdnDims& dims, std::span<const double> conv,
                                  std::span<const double> gates, std::span<const double> state) {
  using namespace gdn_detail;
  Recurrence r = recurrence_stage(dims, normalise_qk(dims, conv), conv, gates, state);
  return {std::move(r.o), std::move(r.state)};
}

GdnCoreResult gdn_chunked_fp64(const GdnDims& dims, std::span<const double> conv,
                               std::span<const double> gates, std::span<const double> state) {
  using namespace gdn_detail;
  const Qk qk = normalise_qk(dims, conv);
  const std::vector<double> gc = gc_stage(dims, gates);
  const Wu wu = wu_stage(dims, qk, conv, gates, gc);
  StatePass pass = state_stage(dims, qk, wu.W, wu.U, gc, state, Carry::own);
  return {output_stage(dims, qk, pass.S, pass.uc, gc), std::move(pass.state)};
}

// `faithful` rounds to BF16 exactly where the backends store BF16 — W, U (wu), the S snapshots
// and uc (state pass; the carry continues from the stored uc), the core output and the normed
// output — and keeps FP64 elsewhere: the FP32 stores (conv, gates, gc, the state) are not
// rounded, so the faithful-vs-exact report measures the BF16 stores alone.
GdnReference gdn_reference(const GdnDims& dims, const GdnInputs& in, Mode mode) {
  using namespace gdn_detail;
  GdnReference r;
  ConvRef conv = conv_stage(dims, in.deint, in.conv_w, in.conv_state);
  r.conv = std::move(conv.out);
  r.conv_state = std::move(conv.tail);
  r.gates = gates_stage(dims, in.ba, in.a_log, in.dt_bias);
  const std::vector<double> state_in = widen_f32(in.state);
  const Qk qk = normalise_qk(dims, r.conv);
  if (mode == Mode::faithful && dims.chunkable()) {
    r.gc = gc_stage(dims, r.gates);
    const Wu wu = wu_stage(dims, qk, r.conv, r.gates, r.gc);
    r.W = rounded_bf16(wu.W);
    r.U = rounded_bf16(wu.U);
    StatePass pass = state_stage(dims, qk, r.W, r.U, r.gc, state_in, Carry::own_rounded);
    r.S = rounded_bf16(std::move(pass.S));
    r.uc = rounded_bf16(std::move(pass.uc));
    r.state = std::move(pass.state);
    r.core = rounded_bf16(output_stage(dims, qk, r.S, r.uc, r.gc));
  } else {
    Recurrence rec = recurrence_stage(dims, qk, r.conv, r.gates, state_in);
    r.core = mode == Mode::faithful ? rounded_bf16(std::move(rec.o)) : std::move(rec.o);
    r.state = std::move(rec.state);
  }
  r.normed = gated_norm_stage(dims, r.core, in.deint, in.norm_w);
  if (mode == Mode::faithful) r.normed = rounded_bf16(std::move(r.normed));
  return r;
}

}  // namespace bufferlab::oracle
