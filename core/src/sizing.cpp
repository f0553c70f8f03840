// Names of sizings and mutants.
#include "bufferlab/core/sizing.h"

#include "bufferlab/core/error.h"
#include "bufferlab/core/op_registry.h"

namespace bufferlab {

const char* to_string(SizingKind k) { return k == SizingKind::spec ? "spec" : "corrected"; }

SizingKind sizing_kind_from_string(const std::string& s) {
  if (s == "spec") return SizingKind::spec;
  if (s == "corrected") return SizingKind::corrected;
  throw Error("sizing = '" + s + "': expected spec or corrected");
}

// The catalogue spells the named extra mutants with a hyphen (M-TIE); C++ names cannot.
const char* to_string(Mutant m) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {
#define BUFFERLAB_MUTANT_NAME(name) #name,
        BUFFERLAB_MUTANTS(BUFFERLAB_MUTANT_NAME)
#undef BUFFERLAB_MUTANT_NAME
    };
    for (auto& n : out)
      for (auto& c : n)
        if (c == '_') c = '-';
    return out;
  }();
  const auto i = static_cast<size_t>(m);
  return i < names.size() ? names[i].c_str() : "?";
}

std::vector<Mutant> all_mutants() {
  std::vector<Mutant> out;
#define BUFFERLAB_MUTANT_LIST(name) out.push_back(Mutant::name);
  BUFFERLAB_MUTANTS(BUFFERLAB_MUTANT_LIST)
#undef BUFFERLAB_MUTANT_LIST
  out.erase(out.begin());  // `none`
  return out;
}

// Every mutant that is not a kernel mutant of the op registry is a static one.
bool is_static_mutant(Mutant m) { return m != Mutant::none && !is_kernel_mutant(m); }

Mutant mutant_from_string(const std::string& s) {
  std::string key = s;
  for (auto& c : key)
    if (c == '_') c = '-';
  for (Mutant m : all_mutants())
    if (key == to_string(m)) return m;
  std::string known;
  for (Mutant m : all_mutants()) known += (known.empty() ? "" : ", ") + std::string(to_string(m));
  throw Error("unknown mutant '" + s + "' (known: " + known + ")");
}

void Sizing::validate() const {
  if (mutant != Mutant::none && kind == SizingKind::spec)
    throw Error(std::string("mutant ") + bufferlab::to_string(mutant) +
                " with sizing spec: mutants are defined relative to the corrected sizing");
}

std::string Sizing::to_string() const {
  std::string s = bufferlab::to_string(kind);
  if (mutant != Mutant::none) s += std::string("+") + bufferlab::to_string(mutant);
  return s;
}

}  // namespace bufferlab
