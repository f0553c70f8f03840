// AgreementReport → JSON.
#include "compare/compare_report.h"

#include <cmath>

namespace bufferlab::cli {
namespace {

nlohmann::json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

nlohmann::json comparison_json(const oracle::TensorComparison& c) {
  nlohmann::json j = {{"tensor", c.name},
                      {"dtype", c.dtype},
                      {"shape", {c.rows, c.cols}},
                      {"asserted", c.asserted},
                      {"passed", c.passed()},
                      {"max_abs", number(c.max_abs)},
                      {"max_rel", number(c.max_rel)},
                      {"nmse", number(c.nmse)},
                      {"nonfinite", c.nonfinite},
                      {"failures", c.failures}};
  if (c.max_ulp) j["max_ulp"] = *c.max_ulp;
  if (c.asserted) {
    j["bound"] = {
        {"rel", number(c.tol.rel)}, {"abs", number(c.tol.abs)}, {"formula", c.tol.formula}};
    if (c.tol.max_ulp) j["bound"]["max_ulp"] = *c.tol.max_ulp;
  }
  if (c.first_bad) {
    const oracle::Mismatch& m = *c.first_bad;
    j["first_bad"] = {{"row", m.row},
                      {"col", m.col},
                      {"backend", number(m.got)},
                      {"backend_bits", m.got_bits},
                      {"oracle", number(m.want)},
                      {"reason", m.reason}};
  }
  return j;
}

}  // namespace

nlohmann::json report_json(const oracle::AgreementReport& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) checks.push_back(comparison_json(c));
  nlohmann::json reported = nlohmann::json::array();
  for (const auto& c : r.reported) reported.push_back(comparison_json(c));
  return {{"op", r.op},          {"params", r.params}, {"backend", r.backend}, {"seed", r.seed},
          {"agree", r.passed()}, {"checks", checks},   {"reported", reported}};
}

}  // namespace bufferlab::cli
