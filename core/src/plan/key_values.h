// The "key=value,key=value" texts of --pass arguments and --paths: one splitter for both.
#pragma once

#include <algorithm>
#include <string>

namespace bufferlab::plan::detail {

// Calls visit(key, value, item) for each comma-separated item of text, in order; an item
// without '=' throws malformed("'<item>' is not key=value") (malformed returns the Error).
template <class Malformed, class Visit>
void for_each_key_value(const std::string& text, Malformed malformed, Visit visit) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw malformed("'" + item + "' is not key=value");
    visit(item.substr(0, eq), item.substr(eq + 1), item);
  }
}

}  // namespace bufferlab::plan::detail
