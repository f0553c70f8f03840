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

// A value of an enumerated option and the name the CLI spells it with.
template <class T>
struct Named {
  const char* name;
  T value;
};

constexpr Named<oracle::MhcStreamMagnitude> kStreamValues[] = {
    {"normal", oracle::MhcStreamMagnitude::normal},
    {"zero", oracle::MhcStreamMagnitude::zero},
    {"huge", oracle::MhcStreamMagnitude::huge}};
constexpr Named<oracle::MhcLowRankPath> kLowRankPaths[] = {{"split", oracle::MhcLowRankPath::split},
                                                           {"slab", oracle::MhcLowRankPath::slab}};
constexpr Named<GdnMamba2Path> kSsmPaths[] = {{"chunked", GdnMamba2Path::chunked},
                                              {"recurrent", GdnMamba2Path::recurrent},
                                              {"auto", GdnMamba2Path::auto_path}};
constexpr Named<oracle::GdnGateRegime> kGateRegimes[] = {
    {"mixed", oracle::GdnGateRegime::mixed},
    {"near-zero", oracle::GdnGateRegime::near_zero},
    {"near-one", oracle::GdnGateRegime::near_one}};
constexpr Named<oracle::Mamba2DtRegime> kDtRegimes[] = {
    {"typical", oracle::Mamba2DtRegime::typical},
    {"large", oracle::Mamba2DtRegime::large},
    {"tiny", oracle::Mamba2DtRegime::tiny}};

// The value named `text` (empty: not given); else "OPTION: unknown WHAT 'TEXT'[ WHERE] (known:
// ...)".
template <class T, size_t N>
std::optional<T> parse_named(const char* option, const std::string& text,
                             const Named<T> (&table)[N], const char* what, const char* where = "") {
  if (text.empty()) return std::nullopt;
  std::string known;
  for (const Named<T>& n : table) {
    if (text == n.name) return n.value;
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  }
  throw Error(fmt::format("{}: unknown {} '{}'{} (known: {})", option, what, text, where, known));
}

template <class T, size_t N>
const char* name_of(T value, const Named<T> (&table)[N]) {
  for (const Named<T>& n : table)
    if (n.value == value) return n.name;
  return "?";
}

std::optional<Given<uint64_t>> sequences(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const uint64_t n = parse_u64("--streams", text);
  if (n == 0) throw Error("--streams 0: a pass needs at least one sequence");
  return Given<uint64_t>{n, text};
}

constexpr Named<AttnLayerKind> kLayerKinds[] = {{"full", AttnLayerKind::full},
                                                {"sliding", AttnLayerKind::sliding}};

std::optional<Given<uint64_t>> count(const char* option, const std::string& text) {
  if (text.empty()) return std::nullopt;
  return Given<uint64_t>{parse_u64(option, text), text};
}

}  // namespace

const char* to_string(AttnLayerKind k) { return name_of(k, kLayerKinds); }

const char* to_string(GdnMamba2Path p) { return name_of(p, kSsmPaths); }
const char* to_string(oracle::GdnGateRegime r) { return name_of(r, kGateRegimes); }
const char* to_string(oracle::Mamba2DtRegime r) { return name_of(r, kDtRegimes); }
const char* to_string(oracle::MhcStreamMagnitude m) { return name_of(m, kStreamValues); }

void require_options_apply(const std::string& op, const RawCompareOptions& raw) {
  require_reads(op, !raw.logit_range.empty(), "--logit-range", kOptLogitRange);
  require_reads(op, !raw.hc_streams.empty(), "--streams", kOptStreamValues | kOptSequences);
  require_reads(op, !raw.hc_eps.empty(), "--hc-eps", kOptMhcEps);
  require_reads(op, !raw.lowrank_path.empty(), "--path", kOptRouterPath | kOptLowRankPath);
  require_reads(op, !raw.alpha.empty(), "--alpha", kOptAlpha);
  require_reads(op, !raw.beta.empty(), "--beta", kOptBeta);
  require_reads(op, raw.parallel_keys, "--parallel-keys", kOptParallelKeys);
  require_reads(op, !raw.dt.empty(), "--dt", kOptDt);
  require_reads(op, raw.zero_state, "--zero-state", kOptZeroState);
  require_reads(op, !raw.ssm_path.empty(), "--path", kOptSsmPath);
  require_reads(op, !raw.context.empty(), "--context", kOptContext);
  require_reads(op, !raw.chunk.empty(), "--chunk", kOptChunk);
  require_reads(op, !raw.layer.empty(), "--layer", kOptLayer);
}

MhcCompareOptions parse_mhc_options(const RawCompareOptions& raw) {
  MhcCompareOptions o;
  o.hc_eps = given_double("--hc-eps", raw.hc_eps);
  if (o.hc_eps && o.hc_eps->value < 0.0)
    throw Error("--hc-eps = '" + raw.hc_eps + "': must be >= 0");
  o.logit_range = given_double("--logit-range", raw.logit_range);
  if (o.logit_range && !(o.logit_range->value > 0.0 && o.logit_range->value <= 100.0))
    throw Error("--logit-range = '" + raw.logit_range + "': must be in (0, 100]");
  o.streams = parse_named("--streams", raw.hc_streams, kStreamValues, "stream values");
  o.lowrank_path = parse_named("--path", raw.lowrank_path, kLowRankPaths, "hc-lowrank path");
  return o;
}

GdnMamba2CompareOptions parse_gdn_mamba2_options(const RawCompareOptions& raw) {
  GdnMamba2CompareOptions o;
  o.streams = sequences(raw.ssm_streams);
  o.path = parse_named("--path", raw.ssm_path, kSsmPaths, "path", " for --op gdn/ssd");
  o.alpha = parse_named("--alpha", raw.alpha, kGateRegimes, "gate regime");
  o.beta = parse_named("--beta", raw.beta, kGateRegimes, "gate regime");
  o.parallel_keys = raw.parallel_keys;
  o.zero_state = raw.zero_state;
  o.dt = parse_named("--dt", raw.dt, kDtRegimes, "dt regime");
  return o;
}

AttnCompareOptions parse_attn_options(const RawCompareOptions& raw) {
  AttnCompareOptions o;
  o.streams = sequences(raw.ssm_streams);
  o.context = count("--context", raw.context);
  o.chunk = count("--chunk", raw.chunk);
  if (o.chunk && o.chunk->value == 0) throw Error("--chunk 0: a chunk needs at least one token");
  o.layer = parse_named("--layer", raw.layer, kLayerKinds, "layer kind");
  return o;
}

std::string attn_rerun_options(const AttnCompareOptions& o) {
  std::string line;
  if (o.streams) line += " --streams " + o.streams->text;
  if (o.context) line += " --context " + o.context->text;
  if (o.chunk) line += " --chunk " + o.chunk->text;
  if (o.layer) line += std::string(" --layer ") + to_string(*o.layer);
  return line;
}

std::string hc_rerun_options(const MhcCompareOptions& o) {
  std::string line;
  if (o.logit_range) line += " --logit-range " + o.logit_range->text;
  if (o.streams) line += std::string(" --streams ") + to_string(*o.streams);
  if (o.hc_eps) line += " --hc-eps " + o.hc_eps->text;
  return line;
}

std::string ssm_rerun_options(const GdnMamba2CompareOptions& o) {
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
