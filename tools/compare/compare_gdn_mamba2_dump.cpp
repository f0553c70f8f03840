// The .npy + manifest.json dumps of `compare --op gdn|ssd` (compare_gdn_mamba2_dump.h).
#include "compare/compare_gdn_mamba2_dump.h"

#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bufferlab/core/ops/gdn.h"
#include "bufferlab/core/ops/mamba2.h"
#include "bufferlab/oracle/mode.h"
#include "compare/compare_dump.h"
#include "compare/compare_report.h"

namespace bufferlab::cli {
namespace {

using Shape = std::vector<uint64_t>;

nlohmann::json manifest_head(const std::string& op, const std::string& params, uint64_t rows,
                             const GdnMamba2DumpInfo& info, const oracle::AgreementReport& report) {
  nlohmann::json m = dump_manifest_head(op, params, info.seed, info.backend, report);
  m["model"] = info.model;
  m["tokens"] = info.tokens;
  m["streams"] = info.streams;
  m["rows"] = rows;
  m["inputs"] = info.profile;
  m["workspace"] = info.workspace;
  return m;
}

// A chunk-scratch array read back as whole regions of `per_region` elements: [regions, ...].
template <class T>
void regions(DumpWriter& w, const std::string& file, const std::string& tensor,
             const std::vector<T>& data, Shape region_shape) {
  uint64_t per_region = 1;
  for (uint64_t d : region_shape) per_region *= d;
  if (data.empty() || per_region == 0 || data.size() % per_region != 0) return;
  Shape shape{data.size() / per_region};
  shape.insert(shape.end(), region_shape.begin(), region_shape.end());
  if constexpr (sizeof(T) == 2)
    w.bf16(file, tensor, data, std::move(shape));
  else
    w.f32(file, tensor, data, std::move(shape));
}

}  // namespace

void write_gdn_dump(const std::string& dir, const oracle::GdnPlan& plan,
                    const oracle::GdnInputs& in, const oracle::GdnRun& run,
                    const oracle::AgreementReport& report, const GdnMamba2DumpInfo& info) {
  const oracle::GdnDims& d = plan.dims;
  const GdnGeometry& g = d.geom;
  const uint64_t rows = d.rows(), n = d.sequences;
  const Shape conv{rows, g.conv_dim}, tail{n, g.conv_dim, g.kernel - 1}, gates{rows, g.nv, 2},
      state{n, g.nv, g.kd, g.vd}, out{rows, g.value_dim};
  DumpWriter w(dir);
  w.bf16("input_deinterleaved.npy", "ssm_deinterleaved [Q | K | V | Z]", in.deint, {rows, g.qkvz});
  w.bf16("input_ba.npy", "ssm_ba [b | a]", in.ba, {rows, 2 * g.nv});
  w.bf16("input_conv_w.npy", "conv1d weight", in.conv_w, {g.conv_dim, g.kernel});
  w.f32("input_a_log.npy", "A_log", in.a_log, {g.nv});
  w.f32("input_dt_bias.npy", "dt_bias", in.dt_bias, {g.nv});
  w.bf16("input_norm_w.npy", "gated norm weight", in.norm_w, {g.vd});
  w.bf16("input_conv_state.npy", "conv tails before the call (oldest first)", in.conv_state, tail);
  w.f32("input_state.npy", "recurrent state S before the call", in.state, state);

  w.f32("backend_conv.npy", "ssm_conv_out_f32 (conv1d + SiLU)", run.conv, conv);
  w.bf16("backend_conv_state.npy", "conv tails after the call", run.conv_state, tail);
  w.f32("backend_gates.npy", "ssm_gates (beta, alpha)", run.gates, gates);
  if (run.path == oracle::GdnPath::chunked) {
    const std::string regs = " regions (b*cdiv(L,64) + c)*nv + v, gdn_fla_scratch";
    regions(w, "backend_gc.npy", "gc (wu)" + regs, run.gc, {GdnChunkCarve::kChunk});
    regions(w, "backend_W.npy", "W (wu)" + regs, run.W, {GdnChunkCarve::kChunk, g.kd});
    regions(w, "backend_U.npy", "U (wu)" + regs, run.U, {GdnChunkCarve::kChunk, g.vd});
    regions(w, "backend_S.npy", "S snapshots (state)" + regs, run.S, {g.kd, g.vd});
    regions(w, "backend_uc.npy", "uc (state)" + regs, run.uc, {GdnChunkCarve::kChunk, g.vd});
  }
  w.f32("backend_state.npy", "recurrent state S after the call", run.state, state);
  w.bf16("backend_core.npy", "attn_output before the gated norm (core output)", run.core, out);
  w.bf16("backend_normed.npy", "attn_output after the gated norm", run.normed, out);

  for (const oracle::Mode mode : {oracle::Mode::faithful, oracle::Mode::exact}) {
    const bool faithful = mode == oracle::Mode::faithful;
    const oracle::GdnReference ref = oracle::gdn_reference(d, in, mode);
    const std::string p = faithful ? "oracle_faithful_" : "oracle_exact_";
    const std::string of = faithful ? "FP64, rounded where the backend stores BF16, of the inputs"
                                    : "FP64 recurrence of the inputs";
    w.f64(p + "conv.npy", of, ref.conv, conv);
    w.f64(p + "conv_state.npy", of, ref.conv_state, tail);
    w.f64(p + "gates.npy", of, ref.gates, gates);
    w.f64(p + "core.npy", of, ref.core, out);
    w.f64(p + "normed.npy", of, ref.normed, out);
    w.f64(p + "state.npy", of, ref.state, state);
  }
  nlohmann::json m = manifest_head("gdn", report.params, rows, info, report);
  m["path"] = run.path == oracle::GdnPath::chunked ? "chunked" : "recurrent";
  m["geometry"] = g.to_string();
  m["eps"] = d.eps;
  m["layout"] =
      "C order; rows = sequences back to back (row = b*L + t); conv columns [Q | K | V], "
      "gates [row, head, (beta, alpha)], state [sequence, head, kd, vd]";
  w.write_manifest(m);
}

void write_mamba2_dump(const std::string& dir, const oracle::Mamba2Plan& plan,
                       const oracle::Mamba2Inputs& in, const oracle::Mamba2Run& run,
                       const oracle::AgreementReport& report, const GdnMamba2DumpInfo& info) {
  const oracle::Mamba2Dims& d = plan.dims;
  const Mamba2Geometry& g = d.geom;
  const uint64_t rows = d.rows(), n = d.sequences;
  const Shape xbc{rows, g.d_xbc}, tail{n, g.d_xbc, g.kernel - 1}, state{n, g.H, g.P, g.N},
      out{rows, g.d_inner};
  DumpWriter w(dir);
  w.bf16("input_zxbcdt.npy", "ssm_qkvz (in_proj rows [z | xBC | dt])", in.zxbcdt,
         {rows, g.in_proj});
  w.bf16("input_conv_w.npy", "conv1d weight", in.conv_w, {g.d_xbc, g.kernel});
  w.bf16("input_conv_b.npy", "conv1d bias", in.conv_b, {g.d_xbc});
  w.f32("input_a_log.npy", "A_log (A = -exp(A_log))", in.a_log, {g.H});
  w.f32("input_dt_bias.npy", "dt_bias", in.dt_bias, {g.H});
  w.f32("input_D.npy", "D", in.D, {g.H});
  w.bf16("input_norm_w.npy", "gated norm weight", in.norm_w, {g.d_inner});
  w.bf16("input_conv_state.npy", "conv tails before the call (oldest first)", in.conv_state, tail);
  w.f32("input_state.npy", "SSM state before the call", in.state, state);

  w.bf16("backend_xbc.npy", "ssm_deinterleaved (xBC after conv1d + SiLU)", run.xbc, xbc);
  w.bf16("backend_conv_state.npy", "conv tails after the call", run.conv_state, tail);
  for (uint64_t b = 0; b < run.sequences.size(); ++b) {
    const oracle::Mamba2Run::Sequence& q = run.sequences[b];
    const std::string p = fmt::format("backend_seq{}_", b);
    const std::string of = fmt::format(" of sequence {} (ssd_scratch, compacted)", b);
    const uint64_t chunks = q.dt.size() / (g.H * Mamba2ChunkCarve::kChunk);
    w.f32(p + "dt.npy", "dt (cumsum)" + of, q.dt, {g.H, chunks, Mamba2ChunkCarve::kChunk});
    w.f32(p + "dA_cumsum.npy", "dA_cumsum (cumsum)" + of, q.da,
          {g.H, chunks, Mamba2ChunkCarve::kChunk});
    w.f32(p + "CB.npy", "CB (bmm)" + of, q.cb,
          {chunks, g.G, Mamba2ChunkCarve::kChunk, Mamba2ChunkCarve::kChunk});
  }
  w.f32("backend_state.npy", "SSM state after the call", run.state, state);
  w.bf16("backend_y.npy", "attn_output (y + D x)", run.y, out);
  w.bf16("backend_normed.npy", "norm_output (gated norm)", run.normed, out);

  for (const oracle::Mode mode : {oracle::Mode::faithful, oracle::Mode::exact}) {
    const bool faithful = mode == oracle::Mode::faithful;
    const oracle::Mamba2Reference ref = oracle::mamba2_reference(d, in, mode);
    const std::string p = faithful ? "oracle_faithful_" : "oracle_exact_";
    const std::string of = faithful ? "FP64 chunked SSD, rounded where the backend stores BF16"
                                    : "FP64 recurrence of the inputs";
    w.f64(p + "xbc.npy", of, ref.xbc, xbc);
    w.f64(p + "conv_state.npy", of, ref.conv_state, tail);
    w.f64(p + "dt.npy", of, ref.dt, {rows, g.H});
    w.f64(p + "y.npy", of, ref.y, out);
    w.f64(p + "normed.npy", of, ref.normed, out);
    w.f64(p + "state.npy", of, ref.state, state);
  }
  nlohmann::json m = manifest_head("ssd", report.params, rows, info, report);
  m["path"] = run.path == oracle::Mamba2Path::chunked ? "chunked" : "recurrent";
  m["geometry"] = g.to_string();
  m["eps"] = d.eps;
  m["layout"] =
      "C order; rows = sequences back to back (row = b*L + t); xBC columns [x | B | C], "
      "state [sequence, head, P, N]; per-sequence dt / dA_cumsum [head, chunk, 64], CB [chunk, "
      "group, 64, 64]";
  w.write_manifest(m);
}

}  // namespace bufferlab::cli
