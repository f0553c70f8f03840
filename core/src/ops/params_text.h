// Text helpers shared by the ops' params() strings and shape errors (private to core/src/ops):
// one copy each, so the op sources (and a unity batch of them) never define their own.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab::detail {

inline std::string u(uint64_t v) { return std::to_string(v); }
// "key=v", one field of a params() string.
inline std::string kv(const char* key, uint64_t v) {
  return std::string(key) + "=" + std::to_string(v);
}
// A double as printf's %g writes it.
inline std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// rows = sequences·L, else an Error naming the op.
inline uint64_t per_sequence(uint64_t rows, uint64_t sequences, const char* op) {
  if (sequences == 0 || rows % sequences != 0)
    throw Error(std::string(op) + ": " + u(rows) + " rows are not " + u(sequences) +
                " equal-length sequences");
  return rows / sequences;
}

}  // namespace bufferlab::detail
