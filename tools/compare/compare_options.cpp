// The mHC and SSM options of `bufferlab compare`, parsed at the command line's boundary into
// typed values (compare_ops.h): which op reads which option comes from the compare table.
#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "common/parse_number.h"
#include "compare/compare_ops.h"
#include "compare/compare_table.h"

namespace bufferlab::cli {
namespace {

// An option given to an op that does not read it would be ignored: refused, naming the ops
// that read it.
void require_reads(const std::string& op, bool given, const char* option, uint32_t readers) {
  const CompareOpEntry* e = find_compare_op(op);
  if (given && (e == nullptr || (e->options & readers) == 0))
    throw Error(fmt::format("{} applies to {} only, not --op {}", option,
                            compare_ops_reading(readers), op));
}

std::optional<Given<double>> given_double(const char* option, const std::string& text) {
  if (text.empty()) return std::nullopt;
  return Given<double>{parse_finite_double(option, text), text};
}

std::optional<oracle::HcStreamMagnitude> stream_values(const std::string& text) {
  if (text.empty()) return std::nullopt;
  for (auto m : {oracle::HcStreamMagnitude::normal, oracle::HcStreamMagnitude::zero,
                 oracle::HcStreamMagnitude::huge})
    if (text == to_string(m)) return m;
  throw Error("--streams: unknown stream values '" + text + "' (known: normal, zero, huge)");
}

std::optional<oracle::HcLowRankPath> lowrank_path(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "split") return oracle::HcLowRankPath::split;
  if (text == "slab") return oracle::HcLowRankPath::slab;
  throw Error("--path: unknown hc-lowrank path '" + text + "' (known: split, slab)");
}

std::optional<Given<uint64_t>> sequences(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const uint64_t n = parse_u64("--streams", text);
  if (n == 0) throw Error("--streams 0: a pass needs at least one sequence");
  return Given<uint64_t>{n, text};
}

std::optional<SsmPath> ssm_path(const std::string& text) {
  if (text.empty()) return std::nullopt;
  for (auto p : {SsmPath::chunked, SsmPath::recurrent, SsmPath::auto_path})
    if (text == to_string(p)) return p;
  throw Error("--path: unknown path '" + text +
              "' for --op gdn/ssd (known: chunked, recurrent, auto)");
}

std::optional<oracle::GdnGateRegime> gate_regime(const char* option, const std::string& text) {
  if (text.empty()) return std::nullopt;
  for (auto r : {oracle::GdnGateRegime::mixed, oracle::GdnGateRegime::near_zero,
                 oracle::GdnGateRegime::near_one})
    if (text == to_string(r)) return r;
  throw Error(fmt::format("{}: unknown gate regime '{}' (known: mixed, near-zero, near-one)",
                          option, text));
}

std::optional<oracle::SsdDtRegime> dt_regime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  for (auto r :
       {oracle::SsdDtRegime::typical, oracle::SsdDtRegime::large, oracle::SsdDtRegime::tiny})
    if (text == to_string(r)) return r;
  throw Error("--dt: unknown dt regime '" + text + "' (known: typical, large, tiny)");
}

}  // namespace

const char* to_string(SsmPath p) {
  switch (p) {
    case SsmPath::chunked:
      return "chunked";
    case SsmPath::recurrent:
      return "recurrent";
    case SsmPath::auto_path:
      return "auto";
  }
  return "?";
}

const char* to_string(oracle::GdnGateRegime r) {
  switch (r) {
    case oracle::GdnGateRegime::mixed:
      return "mixed";
    case oracle::GdnGateRegime::near_zero:
      return "near-zero";
    case oracle::GdnGateRegime::near_one:
      return "near-one";
  }
  return "?";
}

const char* to_string(oracle::SsdDtRegime r) {
  switch (r) {
    case oracle::SsdDtRegime::typical:
      return "typical";
    case oracle::SsdDtRegime::large:
      return "large";
    case oracle::SsdDtRegime::tiny:
      return "tiny";
  }
  return "?";
}

const char* to_string(oracle::HcStreamMagnitude m) {
  switch (m) {
    case oracle::HcStreamMagnitude::normal:
      return "normal";
    case oracle::HcStreamMagnitude::zero:
      return "zero";
    case oracle::HcStreamMagnitude::huge:
      return "huge";
  }
  return "?";
}

void require_options_apply(const std::string& op, const RawCompareOptions& raw) {
  require_reads(op, !raw.logit_range.empty(), "--logit-range", kOptLogitRange);
  require_reads(op, !raw.hc_streams.empty(), "--streams", kOptStreamValues);
  require_reads(op, !raw.hc_eps.empty(), "--hc-eps", kOptHcEps);
  require_reads(op, !raw.lowrank_path.empty(), "--path", kOptRouterPath | kOptLowRankPath);
  require_reads(op, !raw.alpha.empty(), "--alpha", kOptAlpha);
  require_reads(op, !raw.beta.empty(), "--beta", kOptBeta);
  require_reads(op, raw.parallel_keys, "--parallel-keys", kOptParallelKeys);
  require_reads(op, !raw.dt.empty(), "--dt", kOptDt);
  require_reads(op, raw.zero_state, "--zero-state", kOptZeroState);
}

HcCompareOptions parse_hc_options(const RawCompareOptions& raw) {
  HcCompareOptions o;
  o.hc_eps = given_double("--hc-eps", raw.hc_eps);
  if (o.hc_eps && o.hc_eps->value < 0.0)
    throw Error("--hc-eps = '" + raw.hc_eps + "': must be >= 0");
  o.logit_range = given_double("--logit-range", raw.logit_range);
  if (o.logit_range && !(o.logit_range->value > 0.0 && o.logit_range->value <= 100.0))
    throw Error("--logit-range = '" + raw.logit_range + "': must be in (0, 100]");
  o.streams = stream_values(raw.hc_streams);
  o.lowrank_path = lowrank_path(raw.lowrank_path);
  return o;
}

SsmCompareOptions parse_ssm_options(const RawCompareOptions& raw) {
  SsmCompareOptions o;
  o.streams = sequences(raw.ssm_streams);
  o.path = ssm_path(raw.ssm_path);
  o.alpha = gate_regime("--alpha", raw.alpha);
  o.beta = gate_regime("--beta", raw.beta);
  o.parallel_keys = raw.parallel_keys;
  o.zero_state = raw.zero_state;
  o.dt = dt_regime(raw.dt);
  return o;
}

std::string hc_rerun_options(const HcCompareOptions& o) {
  std::string line;
  if (o.logit_range) line += " --logit-range " + o.logit_range->text;
  if (o.streams) line += std::string(" --streams ") + to_string(*o.streams);
  if (o.hc_eps) line += " --hc-eps " + o.hc_eps->text;
  return line;
}

std::string ssm_rerun_options(const SsmCompareOptions& o) {
  std::string line;
  if (o.streams) line += " --streams " + o.streams->text;
  if (o.path) line += std::string(" --path ") + to_string(*o.path);
  if (o.alpha) line += std::string(" --alpha ") + to_string(*o.alpha);
  if (o.beta) line += std::string(" --beta ") + to_string(*o.beta);
  if (o.parallel_keys) line += " --parallel-keys";
  if (o.dt) line += std::string(" --dt ") + to_string(*o.dt);
  if (o.zero_state) line += " --zero-state";
  return line;
}

}  // namespace bufferlab::cli
