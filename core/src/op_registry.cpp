// The op registry's mutant queries (the table itself is constexpr in op_registry.h).
#include "bufferlab/core/op_registry.h"

namespace bufferlab {

std::vector<OpInfo> ops_changed_by(Mutant m) {
  std::vector<OpInfo> out;
  for (const OpInfo& op : kOpRegistry)
    if (op.changed_by(m)) out.push_back(op);
  return out;
}

std::string kernel_mutant_list() {
  std::string out;
  for (Mutant m : all_mutants()) {
    if (!is_kernel_mutant(m)) continue;
    if (!out.empty()) out += ", ";
    out += to_string(m);
  }
  return out;
}

}  // namespace bufferlab
