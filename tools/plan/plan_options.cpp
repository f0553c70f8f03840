// PlanOptions: option declarations and their translation into a PlanRequest.
#include "plan/plan_options.h"

#include "bufferlab/core/error.h"
#include "bufferlab/core/sizing.h"
#include "bufferlab/core/target.h"
#include "common/parse_number.h"

namespace bufferlab::cli {

void PlanOptions::add_options(CLI::App& command) {
  model_.add_options(command);
  shape_.add_options(command);
  target_.add_options(command);
  sizing_option_ = command
                       .add_option("--sizing", sizing_,
                                   "spec (the formulas as written), corrected (with the "
                                   "documented fixes) or tight (every buffer at its "
                                   "high-water mark over verify's grid)")
                       ->type_name("NAME")
                       ->capture_default_str();
  mutant_option_ = command
                       .add_option("--mutant", mutant_,
                                   "re-introduce a catalogued bug (B1..B15, M-TIE, M-SKCOL) on "
                                   "top of the corrected sizing (implies --sizing corrected; "
                                   "an error with --sizing spec)")
                       ->type_name("NAME");
  command.add_option("--alignment", alignment_, "buffer alignment in bytes (a power of two)")
      ->type_name("N")
      ->capture_default_str();
  command.add_option("--redzone", redzone_, "unused bytes after each buffer")
      ->type_name("N")
      ->capture_default_str();
}

PlanRequest PlanOptions::request() const {
  PlanRequest r;
  r.config = model_.load();
  r.context.model = model_.label();
  r.context.shape = shape_.shape();
  r.context.target = target_.target();
  // --mutant alone means "this bug on top of corrected"; with an explicit --sizing spec it
  // is refused by Sizing::validate (mutants are defined relative to corrected).
  const bool has_mutant = mutant_option_->count() > 0;
  if (sizing_ == "tight") {
    if (has_mutant) throw Error("--mutant with --sizing tight: a mutant is a bug of corrected");
    r.tight = true;
    r.sizing = Sizing::corrected();
  } else {
    r.sizing.kind = sizing_option_->count() > 0 || !has_mutant ? sizing_kind_from_string(sizing_)
                                                               : SizingKind::corrected;
    if (has_mutant) r.sizing.mutant = mutant_from_string(mutant_);
    r.sizing.validate();
  }
  r.alignment = parse_u64("--alignment", alignment_);
  r.redzone = parse_u64("--redzone", redzone_);
  if (r.alignment == 0 || (r.alignment & (r.alignment - 1)) != 0)
    throw Error("--alignment = " + alignment_ + ": must be a power of two >= 1");
  return r;
}

}  // namespace bufferlab::cli
