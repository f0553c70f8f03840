// One plan, step by step, then its findings (a debugging view of what `verify` checks).
#include "verify/plan_steps.h"

#include <fmt/format.h>

#include "bufferlab/core/verify/check.h"
#include "verify/verify_report.h"

namespace bufferlab::cli {

int print_plan_steps(std::FILE* out, const plan::PassPlan& plan, const Layout& layout) {
  fmt::print(out, "plan:       {} [{}], sizing {}\n", plan.pass.to_string(), plan.paths.to_string(),
             plan.sizing);
  if (plan.refused) {
    fmt::print(out, "refused:    {}\n", *plan.refused);
    return 0;
  }
  std::string layers;
  for (uint64_t l : plan.layers) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
  fmt::print(out, "layers:     {}\n\n", layers);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& s = plan.steps[i];
    fmt::print(out, "{:4} {:<12} {}{}\n", i, s.where, s.params,
               s.stream == 0 ? "" : fmt::format("  [stream {}]", s.stream));
    for (const Access& a : s.accesses) {
      const bool arena = a.tensor.space == Space::arena;
      fmt::print(out, "       {:<13} {:<44} {}\n", to_string(a.kind),
                 arena ? fmt::format("{} [{}, {})", a.tensor.to_string(), a.begin(), a.end())
                       : a.tensor.to_string(),
                 a.value);
    }
  }
  const auto findings = verify::check(plan, layout);
  if (findings.empty()) {
    fmt::print(out, "\nCLEAN: no findings in this plan\n");
    return 0;
  }
  fmt::print(out, "\nfindings: {}\n", findings.size());
  for (size_t i = 0; i < findings.size(); ++i)
    print_finding(out, findings[i], fmt::format("  [{}] ", i + 1), "      ");
  return 1;
}

}  // namespace bufferlab::cli
