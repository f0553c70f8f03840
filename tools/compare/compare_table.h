// The compare table: every op `bufferlab compare` runs, in the order the CLI lists them — its
// CLI name, the chain of op descriptors it drives (core/ops/*.h types and their stages), the
// options it reads beyond the common ones, the mutants it accepts, its `fuzz --numeric` family
// and its help lines. `compare` (op validation, help, dispatch), `fuzz --numeric` (families
// and their mutants) and the mutant -> op map all derive from it: a new compare op is one
// entry here plus its runner.
//
// The kernel mutants of an entry are those the core op registry (core/op_registry.h) lists for
// its chain's descriptors: the chain names the registry's type names (checked to be real
// types), so a kernel mutant is declared once, on its op, and every CLI op running that op
// accepts it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bufferlab/core/sizing.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {

// The options of `compare` that only some ops read (a bit set). Only the options marked
// "checked" are refused on an op that does not read them; the others are ignored there.
enum CompareOption : uint32_t {
  kOptVariant = 1u << 0,        // --variant (rmsnorm)
  kOptRouterPath = 1u << 1,     // --path bf16 | fp32-gate | fp32-routing
  kOptPattern = 1u << 2,        // --pattern
  kOptHash = 1u << 3,           // --hash
  kOptLogitRange = 1u << 4,     // --logit-range (checked)
  kOptStreamValues = 1u << 5,   // --streams normal | zero | huge (checked)
  kOptMhcEps = 1u << 6,         // --hc-eps (checked)
  kOptLowRankPath = 1u << 7,    // --path split | slab (checked on hc-* ops)
  kOptSequences = 1u << 8,      // --streams N: co-dispatched sequences
  kOptSsmPath = 1u << 9,        // --path chunked | recurrent | auto
  kOptAlpha = 1u << 10,         // --alpha (checked)
  kOptBeta = 1u << 11,          // --beta (checked)
  kOptParallelKeys = 1u << 12,  // --parallel-keys (checked)
  kOptZeroState = 1u << 13,     // --zero-state (checked)
  kOptDt = 1u << 14,            // --dt (checked)
  kOptContext = 1u << 15,       // --context (checked)
  kOptChunk = 1u << 16,         // --chunk (checked)
  kOptLayer = 1u << 17,         // --layer (checked)
};

// The `fuzz --numeric` families, in the order the CLI lists them.
enum class NumericFamily { none, routing, experts, mhc, gdn, ssd, attention };

struct NumericFamilyInfo {
  NumericFamily family;
  std::string_view name;     // the --numeric value
  std::string_view kernels;  // "the {} kernels" in the mutant error
};

// One stage of a chain: a descriptor type of core/ops/*.h and, for a multi-stage descriptor,
// the stage ("" for the whole op).
struct ChainStage {
  std::string_view op;
  std::string_view stage;
};

// Runs an op (compare_ops.h); null: rmsnorm, which cmd_compare.cpp runs with its own report.
using CompareRunner = CompareResult (*)(Backend&, const CompareSetup&);

struct CompareOpEntry {
  std::string_view name;  // --op
  CompareRunner runner;
  std::span<const ChainStage> chain;
  uint32_t options;                        // CompareOption bits
  std::span<const Mutant> sizing_mutants;  // change the workspace the op runs in (B15)
  NumericFamily family;                    // the `fuzz --numeric` family running its kernels
  std::string_view help;                   // the help lines after the name (wrapped)

  bool reads(CompareOption o) const { return (options & o) != 0; }
  // Whether kernel mutant `m` changes one of the chain's ops (the op registry says).
  bool changes_kernels(Mutant m) const;
  // The kernel mutants of the chain's ops, in Mutant order.
  std::vector<Mutant> kernel_mutants() const;
  bool accepts(Mutant m) const;
};

std::span<const CompareOpEntry> compare_ops();
// The entry of `name`; null when no op has it.
const CompareOpEntry* find_compare_op(std::string_view name);
// "rmsnorm, router, topk, ..." (separator between names).
std::string compare_op_names(std::string_view separator);
// The ops reading any of `options`, "a, b and c".
std::string compare_ops_reading(uint32_t options);
// The "ops:" section of `compare --help`: every op's name and help lines.
std::string compare_ops_help();

std::span<const NumericFamilyInfo> numeric_families();
const NumericFamilyInfo* find_numeric_family(std::string_view name);
// Every kernel mutant some op accepts, by family (table order), then by Mutant order.
std::vector<Mutant> compare_kernel_mutants();
// The family whose ops accept the kernel mutant `m` (NumericFamily::none: no op's kernels).
NumericFamily family_of_kernel_mutant(Mutant m);
// "a, b" of the ops accepting `m`, table order (empty: none).
std::string compare_ops_accepting(Mutant m);

}  // namespace bufferlab::cli
