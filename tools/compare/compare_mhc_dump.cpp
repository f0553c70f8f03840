// The .npy + manifest.json dumps of the mHC compare runs: inputs (weights included), the
// backend's stored outputs and the faithful oracle's values (FP64).
#include "compare/compare_mhc_dump.h"

#include <nlohmann/json.hpp>

#include "bufferlab/oracle/mode.h"
#include "compare/compare_dump.h"
#include "compare/compare_report.h"

namespace bufferlab::cli {
namespace {

using Shape = std::vector<uint64_t>;

nlohmann::json manifest_head(const std::string& op, const std::string& params,
                             const MhcDumpInfo& info, const oracle::AgreementReport& report) {
  nlohmann::json m = dump_manifest_head(op, params, info.seed, info.backend, report);
  m["model"] = info.model;
  m["tokens"] = info.tokens;
  m["streams"] = info.streams;
  m["layout"] = "C order; streams [rows, hc, h], comb [rows, hc, hc] (comb_ij at [t, i, j])";
  return m;
}

// A low-rank scratch tensor as the stage stored it: FP32 (split path) or BF16 (slab path).
void scratch(DumpWriter& w, const std::string& file, const std::string& tensor,
             const oracle::MhcScratch& s, Shape shape) {
  if (!s.bf16.empty())
    w.bf16(file, tensor, s.bf16, std::move(shape));
  else
    w.f32(file, tensor, s.f32, std::move(shape));
}

}  // namespace

void write_mhc_pre_dump(const std::string& dir, const MhcPreOp& op, const oracle::MhcPreInputs& in,
                        const oracle::MhcPreOutputs& out, const oracle::AgreementReport& report,
                        const MhcDumpInfo& info) {
  const auto& d = op.shape();
  const Shape streams{d.rows, d.hc, d.h}, per_stream{d.rows, d.hc}, comb{d.rows, d.hc, d.hc},
      rows_h{d.rows, d.h};
  DumpWriter w(dir);
  w.f32("input_streams.npy", "hc_streams (x)", in.streams, streams);
  w.f32("input_fn.npy", "mixing weights fn [pre | post | comb rows]", in.fn, {d.mix, d.hc * d.h});
  w.f32("input_scale.npy", "scale s0 (pre), s1 (post), s2 (comb)", in.scale, {3});
  w.f32("input_bias.npy", "bias [pre | post | comb]", in.bias, {d.mix});
  w.f32("backend_post.npy", "hc_post", out.post, per_stream);
  w.f32("backend_comb.npy", "hc_comb", out.comb, comb);
  w.bf16("backend_block_in.npy", "norm_output (block input)", out.block_in, rows_h);
  const oracle::MhcPreReference ref = oracle::mhc_pre(op, in, oracle::Mode::faithful);
  w.f64("oracle_pre.npy", "FP64 pre weights sigma(mix*s0 + b) + hc_eps", ref.pre, per_stream);
  w.f64("oracle_post.npy", "FP64 post weights", ref.post, per_stream);
  w.f64("oracle_kernel.npy", "FP64 Sinkhorn kernel K = softmax(comb logits) + hc_eps", ref.kernel,
        comb);
  w.f64("oracle_comb.npy", "FP64 Sinkhorn comb", ref.comb, comb);
  w.f64("oracle_faithful_block_in.npy", "FP64 block input, BF16-rounded", ref.block_in, rows_h);
  nlohmann::json m = manifest_head("hc-pre", op.params(), info, report);
  m["rms_eps"] = op.rms_eps;
  m["hc_eps"] = op.hc_eps;
  m["sinkhorn_iters"] = d.iters;
  m["logit_range"] = info.logit_range;
  w.write_manifest(m);
}

void write_mhc_post_dump(const std::string& dir, const MhcPostOp& op,
                         const oracle::MhcPostInputs& in, const std::vector<float>& out,
                         const oracle::AgreementReport& report, const MhcDumpInfo& info) {
  const auto& d = op.shape();
  const Shape streams{d.rows, d.hc, d.h};
  DumpWriter w(dir);
  w.f32("input_post.npy", d.lowrank ? "hc_post (inj)" : "hc_post", in.post, {d.rows, d.hc});
  if (!d.lowrank) w.f32("input_comb.npy", "hc_comb", in.comb, {d.rows, d.hc, d.hc});
  w.bf16("input_block_out.npy", "moe_output (block output)", in.block_out, {d.rows, d.h});
  w.f32("input_streams.npy", "hc_streams before the op", in.streams, streams);
  w.f32("backend_streams.npy", "hc_streams after the op", out, streams);
  w.f64("oracle_streams.npy", "FP64 post step of the inputs", oracle::mhc_post(op, in), streams);
  nlohmann::json m = manifest_head("hc-post", op.params(), info, report);
  m["form"] = d.lowrank ? "low-rank" : "sinkhorn";
  if (!d.lowrank) m["logit_range"] = info.logit_range;
  w.write_manifest(m);
}

void write_mhc_head_dump(const std::string& dir, const MhcHeadOp& op,
                         const oracle::MhcHeadInputs& in, const oracle::MhcHeadOutputs& out,
                         const oracle::AgreementReport& report, const MhcDumpInfo& info) {
  const auto& d = op.shape();
  DumpWriter w(dir);
  w.f32("input_streams.npy", "hc_streams (x)", in.streams, {d.rows, d.hc, d.h});
  w.f32("input_fn.npy", "head mixing weights fn", in.fn, {d.hc, d.hc * d.h});
  w.f32("input_scale.npy", "scale s0", in.scale, {1});
  w.f32("input_bias.npy", "bias", in.bias, {d.hc});
  w.bf16("backend_output.npy", "hidden_states (head output)", out.output, {d.rows, d.h});
  const oracle::MhcHeadReference ref = oracle::mhc_head(op, in, oracle::Mode::faithful);
  w.f64("oracle_pre.npy", "FP64 pre weights", ref.pre, {d.rows, d.hc});
  w.f64("oracle_faithful_output.npy", "FP64 head output, BF16-rounded", ref.output, {d.rows, d.h});
  nlohmann::json m = manifest_head("hc-head", op.params(), info, report);
  m["rms_eps"] = op.rms_eps;
  m["hc_eps"] = op.hc_eps;
  w.write_manifest(m);
}

void write_mhc_expand_dump(const std::string& dir, const MhcExpandOp& op,
                           const std::vector<uint16_t>& in, const std::vector<float>& out,
                           const oracle::AgreementReport& report, const MhcDumpInfo& info) {
  const auto& d = op.shape();
  DumpWriter w(dir);
  w.bf16("input_hidden_states.npy", "hidden_states (embedding rows)", in, {d.rows, d.h});
  w.f32("backend_streams.npy", "hc_streams", out, {d.rows, d.hc, d.h});
  w.f64("oracle_streams.npy", "every stream = the embedding row", oracle::mhc_expand(op, in),
        {d.rows, d.hc, d.h});
  w.write_manifest(manifest_head("hc-expand", op.params(), info, report));
}

void write_mhc_lowrank_dump(const std::string& dir, const oracle::MhcLowRankPlan& plan,
                            const oracle::MhcLowRankInputs& in, const oracle::MhcLowRankRun& run,
                            const oracle::AgreementReport& report, const MhcDumpInfo& info) {
  const oracle::MhcLowRankDims& d = plan.dims;
  const bool slab = plan.path == oracle::MhcLowRankPath::slab;
  const uint64_t W = d.hc * d.h;
  const Shape streams{d.rows, d.hc, d.h}, low{d.rows, d.r}, per_stream{d.rows, d.hc},
      rows_h{d.rows, d.h};
  DumpWriter w(dir);
  w.f32("input_streams.npy", "hc_streams (x)", in.streams, streams);
  w.f32("input_norm_w.npy", "norm weight w (scale 1 + w)", in.weights.norm_w, {d.hc, d.h});
  if (slab) {
    const oracle::MhcLowRankSlabWeights sw = oracle::slab_weights(in.weights);
    w.bf16("input_w_down.npy", "W_down (BF16, as the slab path reads it)", sw.w_down, {d.r, W});
    w.bf16("input_w_inject.npy", "W_inject (BF16)", sw.w_inject, {d.hc, W});
    w.bf16("input_w_up.npy", "W_up (BF16)", sw.w_up, {W, d.r});
  } else {
    w.f32("input_w_down.npy", "W_down", in.weights.w_down, {d.r, W});
    w.f32("input_w_inject.npy", "W_inject", in.weights.w_inject, {d.hc, W});
    w.f32("input_w_up.npy", "W_up", in.weights.w_up, {W, d.r});
  }
  scratch(w, "backend_normed.npy", "hc_lowrank_scratch normed (norm stage)", run.norm.normed,
          streams);
  scratch(w, "backend_low.npy", "hc_lowrank_scratch low (down stage)", run.down.low, low);
  if (slab) {
    scratch(w, "backend_inj_pre.npy", "hc_lowrank_scratch inj_pre (inject stage)",
            run.inject.inj_pre, per_stream);
    scratch(w, "backend_up_pre.npy", "hc_lowrank_scratch up_pre (up stage)", run.up.up_pre,
            streams);
    w.f32("backend_post.npy", "hc_post (collapse stage)", run.collapse.post, per_stream);
  } else {
    w.f32("backend_post.npy", "hc_post (down stage)", run.down.post, per_stream);
  }
  w.bf16("backend_block_in.npy", "norm_output (collapse stage)", run.collapse.block_in, rows_h);
  const oracle::MhcLowRankReference ref = oracle::hc_lowrank(
      d.rows, d.hc, d.h, d.r, d.rms_eps, in.streams, in.weights, slab, oracle::Mode::faithful);
  const char* of = slab ? "FP64 chain of the original inputs, stored BF16 rounded"
                        : "FP64 chain of the original inputs";
  w.f64("oracle_normed.npy", of, ref.normed, streams);
  w.f64("oracle_low.npy", of, ref.low, low);
  w.f64("oracle_inj_pre.npy", of, ref.inj_pre, per_stream);
  w.f64("oracle_up_pre.npy", of, ref.up_pre, streams);
  w.f64("oracle_post.npy", of, ref.post, per_stream);
  w.f64("oracle_faithful_block_in.npy", "FP64 block input of the chain, BF16-rounded", ref.block_in,
        rows_h);
  nlohmann::json m = manifest_head("hc-lowrank", report.params, info, report);
  m["path"] = oracle::to_string(plan.path);
  m["rms_eps"] = d.rms_eps;
  m["slab_rows"] = slab ? plan.slab.front().carve.slab_rows : 0;
  w.write_manifest(m);
}

}  // namespace bufferlab::cli
