// AgreementReport: verdict and the human-readable table.
#include "bufferlab/oracle/agreement_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace bufferlab::oracle {
namespace {

std::string bound_text(const Tolerance& t) {
  std::string s;
  if (t.rel > 0.0 || t.abs > 0.0) s = fmt::format("rel {:.3g} + abs {:.3g}", t.rel, t.abs);
  if (t.max_ulp) s += (s.empty() ? "" : ", ") + fmt::format("<= {} ULP", *t.max_ulp);
  return s.empty() ? "exact" : s;
}

std::string row_text(const TensorComparison& c, size_t name_width) {
  const std::string ulp = c.max_ulp ? std::to_string(*c.max_ulp) : "-";
  const std::string fails = c.asserted ? std::to_string(c.failures) : "-";
  std::string verdict = !c.asserted ? "(reported)" : c.passed() ? "ok" : "FAIL";
  if (c.asserted) verdict += "  " + bound_text(c.tol);
  return fmt::format("  {:<{}} {:<5} {:>11} {:>10.3g} {:>10.3g} {:>10.3g} {:>7} {:>7} {:>6}  {}\n",
                     c.name, name_width, c.dtype, fmt::format("{}x{}", c.rows, c.cols), c.max_abs,
                     c.max_rel, c.nmse, ulp, c.nonfinite, fails, verdict);
}

std::string mismatch_text(const TensorComparison& c) {
  const Mismatch& m = *c.first_bad;
  return fmt::format(
      "  first bad {}[row {}, col {}]: backend {:.9g} (bits {:#x}), oracle {:.17g}: {} ({} of {} "
      "elements fail)\n",
      c.name, m.row, m.col, m.got, m.got_bits, m.want, m.reason, c.failures, c.rows * c.cols);
}

}  // namespace

bool AgreementReport::passed() const { return first_failure() == nullptr; }

const TensorComparison* AgreementReport::first_failure() const {
  for (const auto& c : checks)
    if (!c.passed()) return &c;
  return nullptr;
}

std::string format_report(const AgreementReport& r) {
  return format_report_body(r) + format_outcome(r);
}

std::string format_outcome(const AgreementReport& r) {
  return r.passed() ? "AGREE\n" : fmt::format("DISAGREE (seed {})\n", r.seed);
}

std::string format_report_body(const AgreementReport& r) {
  std::string out = fmt::format("{}  backend={}  seed={}\n", r.params, r.backend, r.seed);
  // The name column fits the longest name (at least 28, the width of the short names).
  size_t w = 28;
  for (const auto* list : {&r.checks, &r.reported})
    for (const auto& c : *list) w = std::max(w, c.name.size());
  const std::string head = fmt::format(
      "  {:<{}} {:<5} {:>11} {:>10} {:>10} {:>10} {:>7} {:>7} {:>6}  {}\n", "tensor", w, "dtype",
      "shape", "max|d|", "max rel", "NMSE", "maxULP", "nonfin", "fails", "result  bound");
  out += "backend vs faithful oracle (asserted):\n" + head;
  for (const auto& c : r.checks) out += row_text(c, w);
  if (!r.reported.empty()) {
    out += "exact vs faithful oracle (reported, not asserted):\n";
    for (const auto& c : r.reported) out += row_text(c, w);
  }
  out += "bounds (derived, docs/spec/numerics.md §9):\n";
  for (const auto& c : r.checks)
    if (!c.tol.formula.empty()) out += fmt::format("  {}: {}\n", c.name, c.tol.formula);
  for (const auto& c : r.checks)
    if (!c.passed() && c.first_bad) out += mismatch_text(c);
  return out;
}

}  // namespace bufferlab::oracle
