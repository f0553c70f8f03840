// "did you mean ...?": the closest of a list of names to a mistyped one, for the errors on an
// unknown command or option (common/app.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bufferlab::cli {

// The candidate nearest to `word` by edit distance (insertions, deletions, substitutions and
// swaps of neighbours), if it is near enough to be a typo: at most 2 edits, and fewer than
// half the word's letters (ties go to the first candidate); else the only candidate that
// begins with `word` (3 characters or more). Nothing when no guess is safe.
std::optional<std::string> closest_name(const std::string& word,
                                        const std::vector<std::string>& candidates);

}  // namespace bufferlab::cli
