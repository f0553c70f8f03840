// The named fixes the `corrected` sizing applies on top of docs/spec/buffers.md §3
// (docs/spec/buffers.md "Two sizings"): one per genuine finding of the static verifier, each
// documented with its minimal counterexample in docs/findings.md. `spec` stays exactly as written.
#pragma once

#include <vector>

#include "bufferlab/core/buffer_registry.h"

namespace bufferlab {

struct Correction {
  const char* id;       // "F1-gdn-core-output"
  BufferId field;       // the buffer whose size (or sub-layout) the fix changes
  const char* fix;      // the change, as a formula
  const char* finding;  // what the verifier found under `spec`
};

const std::vector<Correction>& corrections();

}  // namespace bufferlab
