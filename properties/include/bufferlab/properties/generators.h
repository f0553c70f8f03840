// RapidCheck generators: random VALID model configs of every family of docs/spec/buffers.md §1.2
// with independent feature flags on top, run shapes and targets. Sizes are deliberately odd
// (not multiples of 16/32/64/128) unless a structure demands otherwise. Failing cases shrink
// and print as a reproducible normalized config JSON (showValue below).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/run_shape.h"
#include "bufferlab/core/target.h"

namespace bufferlab {

// Printed by RapidCheck for a counterexample: the normalized config JSON, loadable with
// `bufferlab plan --config FILE`.
void showValue(const ModelConfig& config, std::ostream& os);
void showValue(const RunShape& shape, std::ostream& os);
void showValue(const Target& target, std::ostream& os);

namespace gen {

// The families of docs/spec/buffers.md §1.2 (also the `--family` names of `fuzz`).
const std::vector<std::string>& family_names();

// A valid config of `family` with random independent feature flags.
rc::Gen<ModelConfig> config_of_family(const std::string& family);
// A valid config of any family.
rc::Gen<ModelConfig> valid_config();
// The same, with the family it was drawn from (for RC_TAG coverage reports).
rc::Gen<std::pair<std::string, ModelConfig>> family_and_config();
// Run shapes: m from 1 to 65536, batch 1..192, block 0/16/64, several sequence lengths.
rc::Gen<RunShape> run_shape();
// Every named target, with every split-K policy and the Q2 switches.
rc::Gen<Target> target();

}  // namespace gen
}  // namespace bufferlab
