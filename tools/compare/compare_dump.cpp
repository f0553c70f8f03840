// The .npy + manifest.json dump of one compare run.
#include "compare/compare_dump.h"

#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "bufferlab/core/error.h"
#include "bufferlab/oracle/mode.h"
#include "compare/compare_report.h"
#include "io/json_file.h"
#include "io/npy_writer.h"

namespace bufferlab::cli {
namespace {

constexpr const char* kBf16 = kBf16DumpFormat;

}  // namespace

nlohmann::json dump_manifest_head(const std::string& op, const std::string& params, uint64_t seed,
                                  const std::string& backend,
                                  const oracle::AgreementReport& report) {
  return {{"op", op},
          {"params", params},
          {"seed", seed},
          {"backend", backend},
          {"formats", {{"bf16", kBf16DumpFormat}, {"f32", "<f4"}, {"f64", "<f8"}}},
          {"report", report_json(report)}};
}

DumpWriter::DumpWriter(const std::string& dir) : dir_(create_output_dir("--dump", dir)) {}

void DumpWriter::write_manifest(nlohmann::json manifest) const {
  manifest["files"] = files_;
  write_json_file(dir_ / "manifest.json", manifest);
}

void write_rmsnorm_dump(const std::string& dir, const FusedAddRmsNormOp& op,
                        const oracle::RmsNormInputs& in, const oracle::RmsNormOutputs& out,
                        const oracle::AgreementReport& report, const CompareRunInfo& info) {
  const std::vector<uint64_t> matrix{op.shape().rows, op.shape().width};
  const std::vector<uint64_t> row{op.shape().width};
  DumpWriter w(dir);
  if (op.variant.add_residual)
    w.add("input_hidden_states.npy", "hidden_states (x)", kBf16, "<u2", in.input, matrix);
  w.add("input_residual.npy", "residual before the op", kBf16, "<u2", in.residual, matrix);
  if (!op.variant.unit_weight)
    w.add("input_weight.npy", "norm weight w", kBf16, "<u2", in.weight, row);
  w.add("backend_residual.npy", "residual after the op", kBf16, "<u2", out.residual, matrix);
  w.add("backend_norm_output.npy", "norm_output", kBf16, "<u2", out.output, matrix);
  if (op.variant.write_f32)
    w.add("backend_moe_router_in_f32.npy", "moe_router_in_f32", "f32", "<f4", out.output_f32,
          matrix);

  const auto faithful = oracle::fused_add_rmsnorm(op, in, oracle::Mode::faithful);
  const auto exact = oracle::fused_add_rmsnorm(op, in, oracle::Mode::exact);
  const auto stored = oracle::norm_of_stored_residual(op, out.residual, in.weight);
  w.add("oracle_faithful_residual.npy", "bf16(residual + x) in FP64", "f64", "<f8",
        faithful.residual, matrix);
  w.add("oracle_norm_of_backend_residual.npy",
        "FP64 RMSNorm of the backend's stored residual (what norm_output is judged against)", "f64",
        "<f8", stored.output, matrix);
  w.add("oracle_exact_norm_output.npy", "FP64 RMSNorm of residual + x, nothing rounded", "f64",
        "<f8", exact.output, matrix);

  nlohmann::json manifest =
      dump_manifest_head("rmsnorm", op.params(), info.seed, info.backend, report);
  manifest["variant"] = info.variant;
  manifest["rows"] = op.shape().rows;
  manifest["width"] = op.shape().width;
  manifest["eps"] = op.eps;
  manifest[info.from_preset ? "preset" : "config"] = info.model_label;
  manifest["tokens"] = info.tokens;
  w.write_manifest(manifest);
}

}  // namespace bufferlab::cli
