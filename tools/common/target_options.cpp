// TargetOptions and SizingOptions: declarations and their translation.
#include "common/target_options.h"

#include "bufferlab/core/error.h"

namespace bufferlab::cli {

void TargetOptions::add_options(CLI::App& command) {
  name_option_ = command.add_option("--target", name_, "GPU: h200, h100, b200, gb10")
                     ->type_name("NAME")
                     ->capture_default_str();
  splitk_option_ = command
                       .add_option("--splitk", splitk_,
                                   "split-K policy: legacy, auto or a split count N "
                                   "(default: the target's)")
                       ->type_name("POLICY");
  command.add_flag("--q2-dequant", q2_dequant_, "enable the Q2 dequant path (q2_dequant_scratch)");
  command.add_flag("--q2-mmq", q2_mmq_, "enable the Q2 MMQ path (q2_act_q8)");
}

Target TargetOptions::target() const {
  Target t = Target::named(name_);
  if (!splitk_.empty()) t.set_splitk(splitk_);
  t.q2_dequant = q2_dequant_;
  t.q2_mmq = q2_mmq_;
  return t;
}

bool TargetOptions::given() const {
  return name_option_->count() > 0 || splitk_option_->count() > 0 || q2_dequant_ || q2_mmq_;
}

void SizingOptions::add_options(CLI::App& command) {
  command
      .add_option("--sizing", sizing_,
                  "spec (the formulas as written) or corrected (with the documented fixes)")
      ->type_name("NAME")
      ->capture_default_str();
  mutant_option_ = command
                       .add_option("--mutant", mutant_,
                                   "re-introduce a catalogued bug (B1..B15, M-TIE, M-SKCOL) on "
                                   "top of the corrected sizing (an error with --sizing spec)")
                       ->type_name("ID");
}

Sizing SizingOptions::sizing() const {
  Sizing s;
  s.kind = sizing_kind_from_string(sizing_);
  if (mutant_option_->count() > 0) s.mutant = mutant_from_string(mutant_);
  s.validate();
  // A kernel mutant leaves every size, layout and plan unchanged: a clean report would be
  // a claim the verifier cannot make.
  if (s.mutant != Mutant::none && !is_static_mutant(s.mutant))
    throw Error(std::string("mutant ") + to_string(s.mutant) +
                " changes a kernel's numerics, not sizes, layouts or schedules: the static "
                "verifier cannot see it (its op's numerical property tests catch it)");
  return s;
}

}  // namespace bufferlab::cli
