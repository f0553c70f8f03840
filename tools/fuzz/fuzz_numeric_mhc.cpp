// One case of `bufferlab fuzz --numeric mhc` (fuzz_numeric_mhc.h): the op drawn from the case
// seed, the case from the mHC generators, the run through the oracle's harness and its judge.
#include "fuzz/fuzz_numeric_mhc.h"

#include <fmt/format.h>
#include <rapidcheck.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bufferlab/core/ops/mhc.h"
#include "bufferlab/oracle/mhc.h"
#include "bufferlab/oracle/mhc_harness.h"
#include "bufferlab/oracle/mhc_judge.h"
#include "bufferlab/oracle/seeded_random.h"
#include "bufferlab/properties/mhc_deep_stack.h"
#include "bufferlab/properties/mhc_generators.h"
#include "common/backend_bounds.h"

namespace bufferlab::cli {
namespace {

enum class MhcCheck { pre, post, head, expand, lowrank, deep_stack };

// Without a mutant, in sixteenths: pre 4, post 3, low-rank 4, head 2, expand 1, deep stack 2.
MhcCheck mhc_check(uint64_t cs, Mutant mutant) {
  if (mutant == Mutant::B13) return MhcCheck::deep_stack;
  if (mutant == Mutant::M_SKCOL || mutant == Mutant::M_SKORDER) return MhcCheck::pre;
  static constexpr MhcCheck kDraw[16] = {
      MhcCheck::pre,     MhcCheck::pre,     MhcCheck::pre,        MhcCheck::pre,
      MhcCheck::post,    MhcCheck::post,    MhcCheck::post,       MhcCheck::lowrank,
      MhcCheck::lowrank, MhcCheck::lowrank, MhcCheck::lowrank,    MhcCheck::head,
      MhcCheck::head,    MhcCheck::expand,  MhcCheck::deep_stack, MhcCheck::deep_stack};
  return kDraw[oracle::splitmix64_hash(cs ^ 0x3c3c3c3c3c3c3c3cull) % 16];
}

gen::MhcOpKind kind_of(MhcCheck c) {
  switch (c) {
    case MhcCheck::post:
      return gen::MhcOpKind::post;
    case MhcCheck::head:
      return gen::MhcOpKind::head;
    case MhcCheck::expand:
      return gen::MhcOpKind::expand;
    case MhcCheck::lowrank:
      return gen::MhcOpKind::lowrank;
    default:
      return gen::MhcOpKind::pre;
  }
}

// The deep stack at the fuzz's range: wider than the CI property's (hc ≤ 4, h ≤ 32), under
// ~2^27 oracle multiply-adds per case (40 layers · rows · (2 + hc)·hc · hc·h, three passes).
gen::DeepStackRanges fuzz_deep_stack_ranges() {
  return {.max_mhc = 8, .max_h = 128, .max_rows = 8, .max_iters = 50, .max_logit_range = 4.0};
}

// Post cases run out of place in about half the cases (the result must be the same).
bool post_out_of_place(uint64_t cs) {
  return (oracle::splitmix64_hash(cs ^ 0x0f0f0f0f0f0f0f0full) & 1) != 0;
}

std::string check_name(const gen::MhcCase& c, uint64_t cs) {
  if (c.kind == gen::MhcOpKind::post)
    return post_out_of_place(cs) ? "post-out-of-place" : "post-in-place";
  if (c.kind == gen::MhcOpKind::lowrank) return std::string("lowrank-") + oracle::to_string(c.path);
  return to_string(c.kind);
}

oracle::AgreementReport run_op(Backend& b, const gen::MhcCase& c, bool out_of_place,
                               const oracle::BoundModel& bm) {
  const std::string name = b.name();
  // pre and head: the op over its placed weights, run on `b` and judged.
  const auto run_weighted = [&](auto op, const auto& in, auto run, auto judge) {
    const uint64_t pool = oracle::place_mhc_weights(op);
    const Workspace ws = oracle::allocate_mhc_footprint(b, op, pool);
    return judge(op, in, run(b, ws, op, in), name, c.seed, bm);
  };
  switch (c.kind) {
    case gen::MhcOpKind::pre:
      return run_weighted(MhcPreOp::make(c.config, c.rows), gen::mhc_pre_inputs(c),
                          oracle::run_mhc_pre, oracle::judge_mhc_pre);
    case gen::MhcOpKind::post: {
      MhcPostOp op = MhcPostOp::make(c.config, c.rows);
      const uint64_t pool = out_of_place ? oracle::place_mhc_post_out_of_place(op) : 0;
      const Workspace ws = oracle::allocate_mhc_footprint(b, op, pool);
      const oracle::MhcPostInputs in = gen::mhc_post_inputs(c);
      return oracle::judge_mhc_post(op, in, oracle::run_mhc_post(b, ws, op, in), name, c.seed, bm);
    }
    case gen::MhcOpKind::head:
      return run_weighted(MhcHeadOp::make(c.config, c.rows), gen::mhc_head_inputs(c),
                          oracle::run_mhc_head, oracle::judge_mhc_head);
    case gen::MhcOpKind::expand: {
      const MhcExpandOp op = MhcExpandOp::make(c.config, c.rows);
      const Workspace ws = oracle::allocate_mhc_footprint(b, op, 0);
      const std::vector<uint16_t> in = gen::mhc_expand_input(c);
      return oracle::judge_mhc_expand(op, in, oracle::run_mhc_expand(b, ws, op, in), name, c.seed);
    }
    case gen::MhcOpKind::lowrank: {
      const oracle::MhcLowRankPlan plan = oracle::plan_mhc_lowrank(c.config, c.rows, c.path);
      const Workspace ws = oracle::allocate_mhc_footprint(b, plan);
      const oracle::MhcLowRankInputs in = gen::mhc_lowrank_inputs(c);
      return oracle::judge_mhc_lowrank(oracle::run_mhc_lowrank(b, ws, plan, in), in, name, c.seed,
                                       bm);
    }
  }
  return {};
}

const char* description_of(const std::string& check) {
  if (check == "pre") return "hc_pre (Sinkhorn form), judge_hc_pre";
  if (check == "post-in-place") return "hc_post in place on hc_streams, judge_hc_post";
  if (check == "post-out-of-place") return "hc_post out of place, judge_hc_post";
  if (check == "head") return "hc_head, judge_hc_head";
  if (check == "expand") return "hc_expand, judge_hc_expand";
  if (check == "lowrank-split") return "low-rank pre, split path (FP32), judge_hc_lowrank";
  if (check == "lowrank-slab") return "low-rank pre, slab path (BF16 GEMMs), judge_hc_lowrank";
  return "40 layers hc_pre -> host block -> hc_post in place against the FP64 oracle stack, "
         "the derived deep-stack bound";
}

}  // namespace

MhcFuzzOutcome run_mhc_fuzz_case(Backend& backend, uint64_t cs, int size, Mutant mutant) {
  const rc::Random random(cs);
  const oracle::BoundModel bm = bounds_of(backend);
  const MhcCheck check = mhc_check(cs, mutant);
  MhcFuzzOutcome o;
  std::optional<gen::DeepStackCase> stack;
  std::optional<gen::MhcCase> op;
  if (check == MhcCheck::deep_stack) {
    stack = gen::deep_stack_case(fuzz_deep_stack_ranges())(random, size).value();
    o.description = stack->describe();
    o.check = "deep-stack";
  } else {
    op = gen::hc_case(kind_of(check), gen::full_mhc_ranges())(random, size).value();
    o.description = op->describe();
    o.check = check_name(*op, cs);
  }
  o.check_description = description_of(o.check);
  try {
    if (stack) {
      gen::DeepStackResult r = gen::run_mhc_deep_stack(backend, *stack, bm);
      const std::string summary = gen::summarize(r);
      o.finish(std::move(r.report));
      o.report = "deep stack: " + summary + "\n" + o.report;
    } else {
      o.finish(run_op(backend, *op, post_out_of_place(cs), bm));
    }
  } catch (const std::exception& e) {
    o.passed = false;
    o.what = o.check + ": error";
    o.report = std::string("error: ") + e.what() + "\n";
  }
  return o;
}

}  // namespace bufferlab::cli
