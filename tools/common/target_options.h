// Options shared by `verify`, `fuzz` and `plan`: the target flags (--target, --splitk,
// --q2-dequant, --q2-mmq; all three) and the sizing flags (--sizing, default corrected, and
// --mutant; verify and fuzz — `plan`'s --sizing defaults to spec, plan_options.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "bufferlab/core/sizing.h"
#include "bufferlab/core/target.h"

namespace bufferlab::cli {

class TargetOptions {
 public:
  void add_options(CLI::App& command);
  // The named target with the split-K override and the Q2 switches; throws Error.
  Target target() const;
  // Whether any target flag was given (fuzz then stops drawing random targets).
  bool given() const;

 private:
  std::string name_ = "h200";
  std::string splitk_;
  bool q2_dequant_ = false;
  bool q2_mmq_ = false;
  CLI::Option* name_option_ = nullptr;
  CLI::Option* splitk_option_ = nullptr;
};

class SizingOptions {
 public:
  void add_options(CLI::App& command);
  // corrected unless --sizing says otherwise; a --mutant on top of corrected. A mutant with
  // an explicit --sizing spec is an Error (mutants are defined relative to corrected).
  Sizing sizing() const;

 private:
  std::string sizing_ = "corrected";
  std::string mutant_;
  CLI::Option* mutant_option_ = nullptr;
};

}  // namespace bufferlab::cli
