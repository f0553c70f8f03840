// PassPlan: the ordered steps of one launchable pass on one choice of paths, each with the
// accesses its op declares and the CUDA stream it runs on (docs/spec/buffers.md §2, §5). Built by
// plan::build from the config, the sizing under test (sub-layout parameters, null buffers
// that select a fallback, co-dispatch eligibility) and op semantics (rows, widths).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bufferlab/core/buffer_sizes.h"
#include "bufferlab/core/model_config.h"
#include "bufferlab/core/plan/pass.h"
#include "bufferlab/core/plan/paths.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"
#include "bufferlab/core/tensor_ref.h"

namespace bufferlab::plan {

struct Step {
  std::string op;      // op name: "qkv_proj", "attention_prefill", "upload_positions", ...
  std::string params;  // the op's parameter string: exactly what to re-run
  std::string where;   // "pre", "L3 gdn", "L3 moe", "post"
  std::vector<Access> accesses;
  uint32_t stream = 0;          // CUDA stream; all steps of the engine's passes use 0
  std::vector<uint32_t> after;  // indices of earlier steps this one waits for (events)
};

struct PassPlan {
  Pass pass;
  Paths paths;
  std::string sizing;                     // the sizing the plan was built against
  RunShape shape;                         // the run shape the plan was built for
  std::vector<uint64_t> layers;           // model layers the plan covers, in order
  std::vector<Step> steps;                // empty when refused or ineligible
  std::optional<std::string> refused;     // the engine refuses the pass (counted, not a finding)
  std::optional<std::string> ineligible;  // a legal co-dispatch the layout cannot stage: a finding
  uint64_t eligibility_bytes = 0;         // q12 bytes the co-dispatch needs (0 otherwise)
};

// Builds the plan of `pass` for (config, sizes, target, shape) on `paths`. Never reads a
// buffer's byte count to size a footprint: sizes supply the sub-layout parameters, the
// null buffers that select a fallback path, and the co-dispatch eligibility check.
PassPlan build(const ModelConfig& config, const BufferSizes& sizes, const Target& target,
               const RunShape& shape, const Pass& pass, const Paths& paths);

// The model layers a plan covers: the first and last layer and both layers of the first
// occurrence of every adjacent pair of layer kinds (mixer kind, FFN kind, mHC form), sorted.
std::vector<uint64_t> representative_layers(const ModelConfig& config);

}  // namespace bufferlab::plan
