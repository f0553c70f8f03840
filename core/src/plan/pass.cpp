// Launchable passes (docs/spec/buffers.md §2): geometry and the engine's refusal rule.
#include "bufferlab/core/plan/pass.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/checked.h"
#include "bufferlab/core/error.h"
#include "key_values.h"

namespace bufferlab::plan {

const char* to_string(PassKind k) {
  switch (k) {
    case PassKind::prefill:
      return "prefill";
    case PassKind::decode:
      return "decode";
    case PassKind::verify:
      return "verify";
    case PassKind::mixed:
      return "mixed";
    case PassKind::codispatch:
      return "codispatch";
  }
  return "?";
}

std::vector<PassKind> all_pass_kinds() {
  return {PassKind::prefill, PassKind::decode, PassKind::verify, PassKind::mixed,
          PassKind::codispatch};
}

PassKind pass_kind_from_string(const std::string& s) {
  for (PassKind k : all_pass_kinds())
    if (s == to_string(k)) return k;
  throw Error("unknown pass kind '" + s + "' (known: prefill, decode, verify, mixed, codispatch)");
}

uint64_t Pass::decode_rows() const {
  switch (kind) {
    case PassKind::decode:
    case PassKind::mixed:
      return padded_batch_rung(n);
    case PassKind::verify:
      return rows;
    default:
      return 0;
  }
}

namespace {

// The prefill part as streams × tokens per stream: prefill and mixed one stream of t tokens,
// codispatch n streams of L; none otherwise.
std::pair<uint64_t, uint64_t> prefill_span(const Pass& p) {
  switch (p.kind) {
    case PassKind::prefill:
    case PassKind::mixed:
      return {1, p.t};
    case PassKind::codispatch:
      return {p.n, p.L};
    default:
      return {0, 0};
  }
}

}  // namespace

uint64_t Pass::prefill_tokens() const {
  const auto [streams, tokens] = prefill_span(*this);
  return (Size(streams) * tokens).value();
}

uint64_t Pass::tokens() const { return (Size(decode_rows()) + prefill_tokens()).value(); }

uint64_t Pass::prefill_streams() const { return prefill_span(*this).first; }

uint64_t Pass::stream_tokens() const { return prefill_span(*this).second; }

uint64_t Pass::logits_rows() const {
  switch (kind) {
    case PassKind::prefill:
      return 1;
    case PassKind::decode:
    case PassKind::verify:
      return decode_rows();
    case PassKind::mixed:
      return decode_rows() + 1;
    case PassKind::codispatch:
      return n;
  }
  return 0;
}

LmHeadRows Pass::logits_source_rows() const {
  switch (kind) {
    case PassKind::prefill:
      return {0, t - 1, 0};
    case PassKind::decode:
    case PassKind::verify:
      return {decode_rows(), 0, 0};
    case PassKind::mixed:
      return {decode_rows(), decode_rows() + t - 1, 0};
    case PassKind::codispatch:
      return {0, L - 1, L};
  }
  return {};
}

void Pass::validate() const {
  auto bad = [&](const std::string& why) { throw Error("pass " + to_string() + ": " + why); };
  switch (kind) {
    case PassKind::prefill:
      if (t == 0) bad("t must be ≥ 1");
      break;
    case PassKind::decode:
      if (n == 0) bad("n must be ≥ 1");
      break;
    case PassKind::verify:
      if (rows == 0 || rows > 160) bad("verify rows must be in 1..160");
      break;
    case PassKind::mixed:
      if (n == 0 || t == 0) bad("n and t must be ≥ 1");
      break;
    case PassKind::codispatch:
      if (n < 2 || n > 8) bad("co-dispatch needs 2..8 streams");
      if (L == 0) bad("L must be ≥ 1");
      break;
  }
}

std::optional<std::string> Pass::refusal(const RunShape& s) const {
  const uint64_t m = s.max_batch_tokens;
  const auto over = [&](uint64_t rows, const char* what) -> std::optional<std::string> {
    if (rows <= m) return std::nullopt;
    return std::string(what) + " = " + std::to_string(rows) + " > max_batch_tokens " +
           std::to_string(m);
  };
  switch (kind) {
    case PassKind::prefill:
      return over(t, "chunk tokens");
    case PassKind::verify:
      return over(rows, "verify rows");
    case PassKind::decode:
    case PassKind::mixed:
      if (n > s.max_batch_size)
        return "n = " + std::to_string(n) + " > max_batch_size " + std::to_string(s.max_batch_size);
      if (kind == PassKind::decode) return over(decode_rows(), "rung(n)");
      return over(tokens(), "rung(n) + t");
    case PassKind::codispatch:
      return over(prefill_tokens(), "n·L");
  }
  return std::nullopt;
}

std::string Pass::to_string() const {
  const std::string k = plan::to_string(kind);
  switch (kind) {
    case PassKind::prefill:
      return k + "(t=" + std::to_string(t) + ")";
    case PassKind::decode:
      return k + "(n=" + std::to_string(n) + ",rows=" + std::to_string(decode_rows()) + ")";
    case PassKind::verify:
      return k + "(rows=" + std::to_string(rows) + ")";
    case PassKind::mixed:
      return k + "(n=" + std::to_string(n) + ",t=" + std::to_string(t) + ")";
    case PassKind::codispatch:
      return k + "(n=" + std::to_string(n) + ",L=" + std::to_string(L) + ")";
  }
  return k;
}

Pass Pass::from_string(const std::string& text) {
  const auto bad = [&](const std::string& why) -> Error {
    return Error("pass '" + text + "': " + why +
                 " (expected e.g. prefill(t=5), decode(n=3), verify(rows=7), mixed(n=3,t=20), "
                 "codispatch(n=2,L=65))");
  };
  const size_t open = text.find('(');
  if (open == std::string::npos || text.empty() || text.back() != ')') throw bad("no (…)");
  Pass p;
  p.kind = pass_kind_from_string(text.substr(0, open));
  const std::string args = text.substr(open + 1, text.size() - open - 2);
  detail::for_each_key_value(
      args, bad, [&](const std::string& key, const std::string& value, const std::string&) {
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
            value.size() > 19)
          throw bad("'" + value + "' is not a count");
        const uint64_t v = std::stoull(value);
        if (key == "t")
          p.t = v;
        else if (key == "n")
          p.n = v;
        else if (key == "L")
          p.L = v;
        else if (key == "rows" && p.kind == PassKind::verify)
          p.rows = v;
        else if (key == "rows" && p.kind == PassKind::decode)
          return;  // derived: rung(n)
        else
          throw bad("unknown key '" + key + "' for " + plan::to_string(p.kind));
      });
  p.validate();
  return p;
}

}  // namespace bufferlab::plan
