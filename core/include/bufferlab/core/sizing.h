// Sizing: which set of formulas sizes the arena (docs/spec/buffers.md "Two sizings") and, for
// tests and `--mutant`, which catalogued bug is re-introduced on top of `corrected`.
#pragma once

#include <string>
#include <vector>

namespace bufferlab {

enum class SizingKind { spec, corrected };

// Mutants of docs/spec/bug-catalogue.md (B1..B15) and the named extra ones (kernel mutants of this
// project: M-TIE, M-SKCOL; M-GDNCARRY — the GDN state pass carries its BF16 snapshot instead
// of the FP32 state; M-SSDSTATE — the SSD scan drops the state between chunks; M-SKORDER — the
// Sinkhorn loop normalises columns before rows). Each is defined
// relative to the `corrected` sizing; `none` is the real thing.
#define BUFFERLAB_MUTANTS(X) \
  X(none)                    \
  X(B1)                      \
  X(B2)                      \
  X(B3)                      \
  X(B4)                      \
  X(B5)                      \
  X(B6)                      \
  X(B7)                      \
  X(B8)                      \
  X(B9)                      \
  X(B10)                     \
  X(B11)                     \
  X(B12)                     \
  X(B13)                     \
  X(B14)                     \
  X(B15)                     \
  X(M_TIE)                   \
  X(M_SKCOL)                 \
  X(M_GDNCARRY)              \
  X(M_SSDSTATE)              \
  X(M_GROUP)                 \
  X(M_SKORDER)               \
  X(M_CAUSAL)                \
  X(M_GQA)                   \
  X(M_MERGE)                 \
  X(M_BLOCK)                 \
  X(M_MROPE)                 \
  X(M_SINK)

enum class Mutant {
#define BUFFERLAB_MUTANT_ENUM(name) name,
  BUFFERLAB_MUTANTS(BUFFERLAB_MUTANT_ENUM)
#undef BUFFERLAB_MUTANT_ENUM
};

struct Sizing {
  SizingKind kind = SizingKind::spec;
  Mutant mutant = Mutant::none;

  static Sizing spec() { return {SizingKind::spec, Mutant::none}; }
  static Sizing corrected() { return {SizingKind::corrected, Mutant::none}; }
  // A mutant of `corrected`.
  static Sizing mutant_of_corrected(Mutant m) { return {SizingKind::corrected, m}; }

  bool is(Mutant m) const { return mutant == m; }
  // Throws Error for a mutant on top of `spec` (docs/spec/bug-catalogue.md: mutants are relative to
  // `corrected`).
  void validate() const;
  std::string to_string() const;  // "spec", "corrected", "corrected+B8"

  friend bool operator==(const Sizing&, const Sizing&) = default;
};

const char* to_string(SizingKind k);
SizingKind sizing_kind_from_string(const std::string& s);  // throws Error
const char* to_string(Mutant m);                           // "B8", "M-TIE", "none"
Mutant mutant_from_string(const std::string& s);           // throws Error
std::vector<Mutant> all_mutants();                         // without `none`
// Whether the mutant changes sizes, layouts or schedules — what the static verifier sees
// (B1–B12, B15): every mutant but `none` and the kernel mutants of the op registry
// (op_registry.h), which change a kernel's numerics and are caught by the numerical property
// tests of their op.
bool is_static_mutant(Mutant m);

}  // namespace bufferlab
