// Paths: one choice on each execution-path axis of docs/spec/buffers.md §5 "Paths". A plan is
// built for one Paths value; the verifier covers every combination the model and target
// allow (axes that cannot apply — router without experts, FFN activation without a dense
// model, Q2 the target does not enable, LoRA without an adapter pool — have one choice).
#pragma once

#include <string>
#include <vector>

#include "bufferlab/core/model_config.h"
#include "bufferlab/core/target.h"

namespace bufferlab::plan {

enum class ProjectionPath { bf16, fp8 };
enum class RouterPath { bf16, fp32_gate, fp32_routing };
enum class FfnActPath { fp8, int8, nvfp4, q8_1 };
enum class Q2Path { off, dequant, mmq };

const char* to_string(ProjectionPath p);
const char* to_string(RouterPath p);
const char* to_string(FfnActPath p);
const char* to_string(Q2Path p);

struct Paths {
  ProjectionPath projection = ProjectionPath::bf16;
  RouterPath router = RouterPath::bf16;
  FfnActPath ffn_act = FfnActPath::fp8;
  Q2Path q2 = Q2Path::off;
  bool lora = false;

  std::string to_string() const;  // "proj=fp8,router=bf16,ffn=int8,q2=off,lora=on"
  // Parses what to_string prints; any subset of the keys, the rest at their defaults.
  // Throws Error naming the key or value it does not know.
  static Paths from_string(const std::string& text);
  friend bool operator==(const Paths&, const Paths&) = default;
};

// Every combination of the choices that apply to (config, target): the full product of the
// applicable axes.
std::vector<Paths> all_paths(const ModelConfig& config, const Target& target);

}  // namespace bufferlab::plan
