// closest_name: optimal-string-alignment distance (Damerau–Levenshtein without repeated
// edits of one substring), so "plna" is one edit from "plan"; else the one name the word
// begins.
#include "common/suggest.h"

#include <algorithm>

namespace bufferlab::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> closest_name(const std::string& word,
                                        const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (!best || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  if (best && best_distance <= 2 && 2 * best_distance < word.size()) return best;
  // A truncated name ("--max-seq" for "--max-seq-len") is far in edits but unambiguous.
  std::optional<std::string> extension;
  for (const std::string& c : candidates) {
    if (word.size() < 3 || c.size() <= word.size() || c.compare(0, word.size(), word) != 0)
      continue;
    if (extension) return std::nullopt;  // two names extend it: no guess
    extension = c;
  }
  return extension;
}

}  // namespace bufferlab::cli
