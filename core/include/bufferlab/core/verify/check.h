// The static verifier (docs/spec/buffers.md §2–§5): checks one PassPlan against the Layout of
// the sizing under test and reports every finding — bounds, overlap inside a step,
// liveness, races between unordered streams, read before write, reads of phantom bytes,
// and legal co-dispatch passes the layout cannot stage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/layout.h"
#include "bufferlab/core/plan/pass_plan.h"

namespace bufferlab::verify {

enum class CheckKind {
  bounds,             // (a) an access outside its buffer, or into a null buffer
  overlap,            // (b) two operands of one step share bytes (not declared in place)
  liveness,           // (c) a value overwritten between its write and its read
  race,               // (d) unordered steps on different streams touch the same bytes
  read_before_write,  // (e) bytes read that nothing in the pass wrote
  phantom_read,       // a read of bytes last written as phantom rows
  ineligible,         // a legal co-dispatch pass the layout cannot stage ("legal pass refused")
};
const char* to_string(CheckKind k);
std::vector<CheckKind> all_check_kinds();  // in declaration order (what verify says it checked)

struct Finding {
  CheckKind check = CheckKind::bounds;
  std::string pass;             // Pass::to_string()
  std::string paths;            // Paths::to_string()
  uint64_t step = 0;            // index in the plan
  std::string op;               // op name
  std::string where;            // layer label
  std::string params;           // the op's parameter string
  std::string buffer;           // buffer name
  uint64_t begin = 0, end = 0;  // byte range of the offending access, inside the buffer
  uint64_t buffer_bytes = 0;    // the buffer's size in the layout under test
  std::string detail;           // the human sentence
  std::string sizing;           // sizing the layout came from
  std::string shape;            // the run shape: "m=8192,seq=32768,block=16,bs=32"
  std::string config;           // the model, when the caller names it (VerifyOptions::config_label)

  std::string to_string() const;
};

// Checks `plan` against `layout`. A refused plan has no findings; an ineligible one has
// exactly one. Findings are deduplicated per (check, step, buffer).
std::vector<Finding> check(const plan::PassPlan& plan, const Layout& layout);

}  // namespace bufferlab::verify
