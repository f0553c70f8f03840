// Pass: one launchable pass of the engine (docs/spec/buffers.md §2 "Launchable passes") — its
// kind and the geometry that decides which rows every op writes — and the engine's refusal
// rule, which depends on the run shape only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/ops/embedding.h"
#include "bufferlab/core/run_shape.h"

namespace bufferlab::plan {

enum class PassKind { prefill, decode, verify, mixed, codispatch };
const char* to_string(PassKind k);
PassKind pass_kind_from_string(const std::string& s);  // throws Error
std::vector<PassKind> all_pass_kinds();

struct Pass {
  PassKind kind = PassKind::prefill;
  uint64_t t = 0;     // prefill: chunk tokens; mixed: the prefill chunk's tokens
  uint64_t n = 0;     // decode/mixed: live sequences; codispatch: streams (2..8)
  uint64_t rows = 0;  // verify: rows (n sequences × k drafts, ≤ 160)
  uint64_t L = 0;     // codispatch: tokens per stream

  static Pass prefill(uint64_t t) { return {PassKind::prefill, t, 0, 0, 0}; }
  static Pass decode(uint64_t n) { return {PassKind::decode, 0, n, 0, 0}; }
  static Pass verify(uint64_t rows) { return {PassKind::verify, 0, 0, rows, 0}; }
  static Pass mixed(uint64_t n, uint64_t t) { return {PassKind::mixed, t, n, 0, 0}; }
  static Pass codispatch(uint64_t n, uint64_t L) { return {PassKind::codispatch, 0, n, 0, L}; }

  // Rows every per-token op of the pass launches: prefill t; decode rung(n); verify rows;
  // mixed rung(n) + t; codispatch n·L. Throws Error on overflow.
  uint64_t tokens() const;
  // Rows of the decode part (decode rung(n); mixed rung(n); verify rows), 0 otherwise.
  uint64_t decode_rows() const;
  // Tokens of the prefill part (prefill t; mixed t; codispatch n·L), 0 otherwise.
  uint64_t prefill_tokens() const;
  // Rows the LM head writes into `logits` (docs/spec/buffers.md §4.9): prefill 1; decode rung(n);
  // verify rows; mixed rung(n) + 1 (the prefill's last token parked at row rung(n));
  // codispatch n (one row per stream).
  uint64_t logits_rows() const;
  // Which input row each of those reads (docs/spec/buffers.md §4.9); see LmHeadRows
  // (ops/embedding.h).
  LmHeadRows logits_source_rows() const;
  // Number of prefill sequences (streams): codispatch n, prefill/mixed 1, else 0.
  uint64_t prefill_streams() const;
  // Tokens of each prefill stream: codispatch L, prefill/mixed t, else 0.
  uint64_t stream_tokens() const;

  // The reason the engine refuses the pass for this run shape, or nothing when it launches
  // (docs/spec/buffers.md §2). Co-dispatch eligibility is not a refusal: see plan::build.
  std::optional<std::string> refusal(const RunShape& shape) const;
  // Throws Error when the pass is malformed for its kind (t = 0, n outside its range, ...).
  void validate() const;

  std::string to_string() const;  // "prefill(t=1193)", "mixed(n=3,t=100)"
  // Parses what to_string prints ("decode(n=33,rows=48)": rows is derived, and ignored);
  // throws Error naming the text on anything else. The result is validate()d.
  static Pass from_string(const std::string& text);
  friend bool operator==(const Pass&, const Pass&) = default;
};

}  // namespace bufferlab::plan
