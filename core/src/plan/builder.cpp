// Step builder of plan::build: scopes values to the current sub-block.
#include "builder.h"

namespace bufferlab::plan::detail {

uint32_t Builder::add(std::string op, std::string params, std::vector<Access> accesses,
                      uint32_t stream, std::vector<uint32_t> after) {
  for (Access& a : accesses)
    if (!a.value.empty() && a.value[0] != '@') a.value = prefix_ + a.value;
  plan_.steps.push_back(Step{std::move(op), std::move(params), where_, std::move(accesses), stream,
                             std::move(after)});
  return static_cast<uint32_t>(plan_.steps.size() - 1);
}

}  // namespace bufferlab::plan::detail
