// The slack section of `verify` (docs/spec/buffers.md §3): every buffer's high-water mark —
// the highest end offset any checked access reaches, and the pass and step reaching it —
// next to the bytes allocated, most wasted first, and the arena the marks need versus the
// arena the formulas allocate. Text and JSON.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/verify/high_water.h"

namespace bufferlab::cli {

// `sizing` names where the allocated bytes come from ("corrected", "file plan.json").
void print_slack_table(std::FILE* out, const verify::SlackReport& slack, const std::string& sizing);
nlohmann::json slack_json(const verify::SlackReport& slack);

}  // namespace bufferlab::cli
