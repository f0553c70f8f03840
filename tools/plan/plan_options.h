// The options that choose one plan — model (--preset | --config), run shape, target,
// sizing / mutant, alignment and redzone — with the defaults of docs/spec/buffers.md §2, turned
// into a validated PlanRequest. `plan` uses them; other commands can reuse them.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "common/model_source.h"
#include "common/shape_options.h"
#include "common/target_options.h"
#include "plan/plan_request.h"

namespace bufferlab::cli {

class PlanOptions {
 public:
  void add_options(CLI::App& command);

  // Parses and checks every option; throws bufferlab::Error naming the bad one.
  PlanRequest request() const;

  bool max_batch_tokens_given() const { return shape_.max_batch_tokens_given(); }

 private:
  ModelSource model_;
  ShapeOptions shape_;    // --max-batch-tokens, --max-seq-len, --kv-block-size, --max-batch-size
  TargetOptions target_;  // --target, --splitk, --q2-dequant, --q2-mmq
  std::string sizing_ = "spec";
  std::string mutant_;
  std::string alignment_ = "256";
  std::string redzone_ = "0";
  CLI::Option* sizing_option_ = nullptr;
  CLI::Option* mutant_option_ = nullptr;
};

}  // namespace bufferlab::cli
