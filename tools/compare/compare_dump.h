// `bufferlab compare --dump DIR`: the inputs, the backend's outputs and the oracle's values of
// one run as .npy files, and a manifest.json that says what each file holds (tensor, dtype —
// BF16 "as uint16" —, shape), the op, its parameter string, eps, seed, backend, model and
// tokens, and the agreement report. Enough to re-judge the run in NumPy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/oracle/agreement_report.h"
#include "bufferlab/oracle/rmsnorm.h"
#include "io/npy_writer.h"

namespace bufferlab::cli {

// BF16 arrays are dumped as their raw bits; the manifest says so with this format string.
inline constexpr const char* kBf16DumpFormat = "bf16 as uint16 (raw bits)";

// Writes .npy arrays into a directory (created if needed; Error when it cannot be) and
// records each in the manifest's "files": tensor, format, NumPy dtype, shape.
class DumpWriter {
 public:
  explicit DumpWriter(const std::string& dir);

  template <class T>
  void add(const std::string& file, const std::string& tensor, const char* format,
           const char* descr, const std::vector<T>& data, std::vector<uint64_t> shape) {
    write_npy((dir_ / file).string(), std::span<const T>(data), shape);
    files_[file] = {{"tensor", tensor}, {"format", format}, {"npy_dtype", descr}, {"shape", shape}};
  }
  void bf16(const std::string& file, const std::string& tensor, const std::vector<uint16_t>& data,
            std::vector<uint64_t> shape) {
    add(file, tensor, kBf16DumpFormat, "<u2", data, std::move(shape));
  }
  void f32(const std::string& file, const std::string& tensor, const std::vector<float>& data,
           std::vector<uint64_t> shape) {
    add(file, tensor, "f32", "<f4", data, std::move(shape));
  }
  void f64(const std::string& file, const std::string& tensor, const std::vector<double>& data,
           std::vector<uint64_t> shape) {
    add(file, tensor, "f64", "<f8", data, std::move(shape));
  }
  void u32(const std::string& file, const std::string& tensor, const std::vector<uint32_t>& data,
           std::vector<uint64_t> shape) {
    add(file, tensor, "u32", "<u4", data, std::move(shape));
  }
  // manifest.json: `manifest` plus "files". Error when it cannot be written.
  void write_manifest(nlohmann::json manifest) const;

 private:
  std::filesystem::path dir_;
  nlohmann::json files_ = nlohmann::json::object();
};

// The manifest fields every op's dump has: op, params, seed, backend, the array formats (bf16
// raw bits, f32, f64) and the judge's report; each op's writer adds its own.
nlohmann::json dump_manifest_head(const std::string& op, const std::string& params, uint64_t seed,
                                  const std::string& backend,
                                  const oracle::AgreementReport& report);

struct CompareRunInfo {
  std::string model_label;  // preset name or config path
  bool from_preset = true;
  std::string variant;  // the --variant name
  uint64_t tokens = 0;
  uint64_t seed = 0;
  std::string backend;
};

// Creates `dir` if needed; throws bufferlab::Error when a file cannot be written.
void write_rmsnorm_dump(const std::string& dir, const FusedAddRmsNormOp& op,
                        const oracle::RmsNormInputs& in, const oracle::RmsNormOutputs& out,
                        const oracle::AgreementReport& report, const CompareRunInfo& info);

}  // namespace bufferlab::cli
