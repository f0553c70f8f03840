// Execution-path choices (docs/spec/buffers.md §5 "Paths") and their enumeration.
#include "bufferlab/core/plan/paths.h"

#include <algorithm>

#include "bufferlab/core/error.h"
#include "key_values.h"

namespace bufferlab::plan {

const char* to_string(ProjectionPath p) { return p == ProjectionPath::bf16 ? "bf16" : "fp8"; }

const char* to_string(RouterPath p) {
  switch (p) {
    case RouterPath::bf16:
      return "bf16";
    case RouterPath::fp32_gate:
      return "fp32-gate";
    case RouterPath::fp32_routing:
      return "fp32-routing";
  }
  return "?";
}

const char* to_string(FfnActPath p) {
  switch (p) {
    case FfnActPath::fp8:
      return "fp8";
    case FfnActPath::int8:
      return "int8";
    case FfnActPath::nvfp4:
      return "nvfp4";
    case FfnActPath::q8_1:
      return "q8_1";
  }
  return "?";
}

const char* to_string(Q2Path p) {
  switch (p) {
    case Q2Path::off:
      return "off";
    case Q2Path::dequant:
      return "dequant";
    case Q2Path::mmq:
      return "mmq";
  }
  return "?";
}

std::string Paths::to_string() const {
  return std::string("proj=") + plan::to_string(projection) + ",router=" + plan::to_string(router) +
         ",ffn=" + plan::to_string(ffn_act) + ",q2=" + plan::to_string(q2) +
         ",lora=" + (lora ? "on" : "off");
}

namespace {

template <class E>
E choice(const std::string& key, const std::string& value, std::initializer_list<E> all) {
  std::string known;
  for (E e : all) {
    if (value == to_string(e)) return e;
    known += (known.empty() ? "" : ", ") + std::string(to_string(e));
  }
  throw Error("paths: " + key + "=" + value + " (known: " + known + ")");
}

}  // namespace

Paths Paths::from_string(const std::string& text) {
  Paths p;
  const auto malformed = [](const std::string& why) { return Error("paths: " + why); };
  detail::for_each_key_value(
      text, malformed,
      [&](const std::string& key, const std::string& value, const std::string& kv) {
        if (key == "proj")
          p.projection = choice(key, value, {ProjectionPath::bf16, ProjectionPath::fp8});
        else if (key == "router")
          p.router = choice(key, value,
                            {RouterPath::bf16, RouterPath::fp32_gate, RouterPath::fp32_routing});
        else if (key == "ffn")
          p.ffn_act = choice(
              key, value, {FfnActPath::fp8, FfnActPath::int8, FfnActPath::nvfp4, FfnActPath::q8_1});
        else if (key == "q2")
          p.q2 = choice(key, value, {Q2Path::off, Q2Path::dequant, Q2Path::mmq});
        else if (key == "lora" && (value == "on" || value == "off"))
          p.lora = value == "on";
        else
          throw Error("paths: unknown '" + kv + "' (keys: proj, router, ffn, q2, lora)");
      });
  return p;
}

std::vector<Paths> all_paths(const ModelConfig& c, const Target& t) {
  std::vector<RouterPath> routers = {RouterPath::bf16};
  if (c.num_experts > 0)
    routers = {RouterPath::bf16, RouterPath::fp32_gate, RouterPath::fp32_routing};
  std::vector<FfnActPath> acts = {FfnActPath::fp8};
  if (c.num_experts == 0)
    acts = {FfnActPath::fp8, FfnActPath::int8, FfnActPath::nvfp4, FfnActPath::q8_1};
  std::vector<Q2Path> q2s = {Q2Path::off};
  if (t.q2_dequant) q2s.push_back(Q2Path::dequant);
  if (t.q2_mmq) q2s.push_back(Q2Path::mmq);
  std::vector<bool> loras = {false};
  if (c.adapter_max_rank > 0) loras.push_back(true);

  std::vector<Paths> out;
  for (ProjectionPath p : {ProjectionPath::bf16, ProjectionPath::fp8})
    for (RouterPath r : routers)
      for (FfnActPath a : acts)
        for (Q2Path q : q2s)
          for (bool l : loras) out.push_back(Paths{p, r, a, q, l});
  return out;
}

}  // namespace bufferlab::plan
