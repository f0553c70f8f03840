// verify_config: the grid of passes × path combinations, each plan checked.
#include "bufferlab/core/verify/driver.h"

#include <algorithm>
#include <map>
#include <set>

#include "bufferlab/core/buffer_sizes.h"

namespace bufferlab::verify {
namespace {

using plan::Pass;
using plan::PassKind;

void add_around(std::set<uint64_t>& s, uint64_t center, uint64_t lo, uint64_t hi) {
  for (int64_t d = -1; d <= 1; ++d) {
    const int64_t v = static_cast<int64_t>(center) + d;
    if (v >= static_cast<int64_t>(lo) && static_cast<uint64_t>(v) <= hi)
      s.insert(static_cast<uint64_t>(v));
  }
}

}  // namespace

std::string plan_key(const Pass& p) {
  if (p.kind == PassKind::decode) return "decode/" + std::to_string(p.decode_rows());
  return p.to_string();
}

std::vector<Pass> pass_grid(const RunShape& shape) {
  const uint64_t m = shape.max_batch_tokens, bs = shape.max_batch_size;
  std::vector<Pass> out;
  std::set<uint64_t> ts = {1, 2};
  for (uint64_t k : {16, 32, 48, 64, 128}) add_around(ts, k, 1, m + 1);
  add_around(ts, m, 1, m + 1);
  add_around(ts, ceil16(Size(m)).value(), 1, m + 1);
  for (uint64_t t : ts) out.push_back(Pass::prefill(t));

  for (uint64_t n = 1; n <= bs + 1; ++n) out.push_back(Pass::decode(n));

  std::set<uint64_t> vs = {1, 2, 15, 16, 17, 63, 64, 65, 96, 128, 159, 160};
  if (m <= 160) add_around(vs, m, 1, 160);
  for (uint64_t v : vs) out.push_back(Pass::verify(v));

  // The largest n of every rung up to max_batch_size.
  std::set<uint64_t> ns;
  for (uint64_t n = 1; n <= bs; ++n)
    if (n == bs || padded_batch_rung(n + 1) != padded_batch_rung(n)) ns.insert(n);
  for (uint64_t n : ns) {
    const uint64_t r = padded_batch_rung(n);
    std::set<uint64_t> mts = {1, 16, 64, 65};
    if (m > r)
      add_around(mts, m - r, 1, m - r + 1);
    else
      mts.insert(1);
    for (uint64_t t : mts) out.push_back(Pass::mixed(n, t));
  }

  for (uint64_t n = 2; n <= 8; ++n) {
    std::set<uint64_t> Ls = {1, 63, 64, 65};
    add_around(Ls, std::max<uint64_t>(m / n, 1), 1, m / n + 1);
    for (uint64_t L : Ls) out.push_back(Pass::codispatch(n, L));
  }
  return out;
}

ConfigReport verify_config(const ModelConfig& config, const BufferSizes& sizes,
                           const Target& target, const RunShape& shape,
                           const std::vector<Pass>& passes, const VerifyOptions& opts) {
  const Layout layout = Layout::build(sizes);
  const std::vector<plan::Paths> paths =
      opts.paths.empty() ? plan::all_paths(config, target) : opts.paths;
  ConfigReport report;
  report.paths = paths.size();
  for (PassKind k : plan::all_pass_kinds()) report.kinds.push_back(KindSummary{k});
  std::map<std::string, uint64_t> done;  // plan key → findings it produced

  for (const Pass& pass : passes) {
    KindSummary& ks = report.kinds[static_cast<size_t>(pass.kind)];
    ++ks.passes;
    if (pass.refusal(shape)) {
      ++ks.refused;
      continue;
    }
    const uint64_t tokens = pass.tokens();
    ks.min_tokens = ks.passes - ks.refused == 1 ? tokens : std::min(ks.min_tokens, tokens);
    ks.max_tokens = std::max(ks.max_tokens, tokens);
    const std::string key = plan_key(pass);
    if (auto it = done.find(key); it != done.end()) {
      ks.plans += paths.size();
      ks.findings += it->second;
      continue;
    }
    uint64_t found = 0;
    for (const plan::Paths& p : paths) {
      const plan::PassPlan pl = plan::build(config, sizes, target, shape, pass, p);
      ++ks.plans;
      ++ks.distinct_plans;
      ++report.plans;
      report.high_water.record(pl);
      std::vector<Finding> f = check(pl, layout);
      found += f.size();
      for (Finding& x : f) {
        x.config = opts.config_label;
        if (report.findings.size() < opts.max_findings) report.findings.push_back(std::move(x));
      }
      if (opts.stop_at_first && !f.empty()) break;
    }
    ks.findings += found;
    done[key] = found;
    if (opts.stop_at_first && found > 0) break;
  }
  return report;
}

std::optional<OverflowingPrefill> smallest_overflowing_prefill(
    const ModelConfig& config, const BufferSizes& sizes, const Target& target,
    const RunShape& shape, const std::string& buffer, const VerifyOptions& opts) {
  const Layout layout = Layout::build(sizes);
  const std::vector<plan::Paths> paths =
      opts.paths.empty() ? plan::all_paths(config, target) : opts.paths;
  auto overflow_at = [&](uint64_t t) -> std::optional<Finding> {
    for (const plan::Paths& p : paths)
      for (Finding& f :
           check(plan::build(config, sizes, target, shape, Pass::prefill(t), p), layout))
        if (f.check == CheckKind::bounds && f.buffer == buffer) return f;
    return std::nullopt;
  };
  std::optional<Finding> hi = overflow_at(shape.max_batch_tokens);
  if (!hi) return std::nullopt;
  uint64_t lo = 0, t = shape.max_batch_tokens;  // lo: no overflow (0 = none known), t: overflow
  while (t - lo > 1) {
    const uint64_t mid = lo + (t - lo) / 2;
    if (auto f = overflow_at(mid)) {
      t = mid;
      hi = std::move(f);
    } else {
      lo = mid;
    }
  }
  return OverflowingPrefill{t, std::move(*hi)};
}

}  // namespace bufferlab::verify
