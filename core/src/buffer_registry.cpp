// Registry look-ups by name.
#include "bufferlab/core/buffer_registry.h"

#include <string>

#include "bufferlab/core/error.h"

namespace bufferlab {

BufferId buffer_id_from_name(std::string_view name) {
  for (const auto& info : kBufferRegistry)
    if (info.name == name) return info.id;
  throw Error("unknown buffer '" + std::string(name) + "'");
}

}  // namespace bufferlab
