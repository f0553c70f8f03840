// The golden cases of tests/golden/ (docs/golden.md): inputs and third-party FP64 outputs that
// scripts/golden/make_golden.py wrote, read without Python; the backends a golden test judges;
// and the bounded element-wise check every golden test reports through.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bufferlab/backends/backend_factory.h"
#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/core/number_formats.h"
#include "bufferlab/oracle/bounds.h"
#include "cpu_backend.h"
#include "npy.h"

namespace bufferlab::golden {

inline std::string golden_dir() { return BUFFERLAB_GOLDEN_DIR; }

struct GoldenCase {
  std::string name, family;
  uint64_t seed = 0;
  nlohmann::json params;
  std::map<std::string, testing::NpyArray> arrays;

  const testing::NpyArray& at(const std::string& key) const {
    const auto it = arrays.find(key);
    if (it == arrays.end()) throw Error("golden case " + name + " has no array " + key);
    return it->second;
  }
  const std::vector<double>& values(const std::string& key) const { return at(key).values; }
  uint64_t param(const std::string& key) const { return params.at(key).get<uint64_t>(); }
  double real(const std::string& key) const { return params.at(key).get<double>(); }
};

inline const nlohmann::json& golden_manifest() {
  static const nlohmann::json manifest = [] {
    std::ifstream in(golden_dir() + "/manifest.json");
    if (!in) throw Error(golden_dir() + "/manifest.json: cannot open");
    return nlohmann::json::parse(in);
  }();
  return manifest;
}

inline GoldenCase load_golden(const std::string& name) {
  for (const nlohmann::json& c : golden_manifest().at("cases")) {
    if (c.at("name") != name) continue;
    GoldenCase g;
    g.name = name;
    g.family = c.at("family").get<std::string>();
    g.seed = c.at("seed").get<uint64_t>();
    g.params = c.at("params");
    for (const auto& [key, info] : c.at("arrays").items()) {
      testing::NpyArray a =
          testing::read_npy(golden_dir() + "/" + info.at("file").get<std::string>());
      if (a.shape != info.at("shape").get<std::vector<uint64_t>>())
        throw Error("golden " + name + "/" + key + ": shape differs from the manifest's");
      g.arrays.emplace(key, std::move(a));
    }
    return g;
  }
  throw Error("golden case " + name + " is not in the manifest");
}

// BF16 bits of values that are BF16 numbers already (the stored inputs), and back.
inline std::vector<uint16_t> bf16_bits_of(const std::vector<double>& v) {
  std::vector<uint16_t> b;
  for (double x : v) b.push_back(f32_to_bf16_bits(static_cast<float>(x)));
  return b;
}
inline std::vector<double> widen_bf16(const std::vector<uint16_t>& b) {
  std::vector<double> v;
  for (uint16_t x : b) v.push_back(bf16_bits_to_f32(x));
  return v;
}

// A backend a golden test judges, with the roundoffs its bounds are derived for.
struct GoldenBackend {
  std::string name;
  Backend* backend = nullptr;
  oracle::BoundModel bm;
};

// The CPU backend always; cuda-sim when built; cuda when built and usable. A backend that
// cannot run here (BackendUnavailable) is left out with its reason printed: only that backend
// is skipped.
inline const std::vector<GoldenBackend>& golden_backends() {
  // One object built after the backends: statics a backend creates while it is made (the
  // simulator's device memory) are then destroyed after it, not before.
  struct Backends {
    std::vector<std::unique_ptr<Backend>> owned;
    std::vector<GoldenBackend> list;
  };
  static const Backends backends = [] {
    Backends b;
    b.list.push_back({"cpu", &testing::cpu_backend(), oracle::cpu_bounds()});
    std::vector<std::string> others;
    if (cuda_sim_backend_built()) others.push_back("cuda-sim");
    if (cuda_backend_built()) others.push_back("cuda");
    for (const std::string& name : others) {
      try {
        b.owned.push_back(make_backend(name));
        b.list.push_back({name, b.owned.back().get(), oracle::device_bounds()});
      } catch (const BackendUnavailable& e) {
        fmt::print("golden: backend {} skipped: {}\n", name, e.what());
      }
    }
    return b;
  }();
  return backends.list;
}

// |got − want| ≤ bound element by element, with the largest difference and the largest
// difference / bound kept for the report. A NaN on either side, or a NaN bound, fails.
struct BoundedCheck {
  std::string name;
  uint64_t count = 0, bad = 0;
  double max_diff = 0.0, max_ratio = 0.0, bound_at_max_ratio = 0.0;
  std::string first_bad;

  explicit BoundedCheck(std::string n) : name(std::move(n)) {}

  void add(double got, double want, double bound, const std::string& where) {
    ++count;
    const double diff = std::fabs(got - want);
    const bool ok = diff <= bound;  // false for any NaN
    if (!std::isnan(diff)) max_diff = std::max(max_diff, diff);
    const double ratio = bound > 0.0 ? diff / bound : (diff == 0.0 ? 0.0 : INFINITY);
    if (!(ratio <= max_ratio)) {
      max_ratio = std::isnan(ratio) ? INFINITY : ratio;
      bound_at_max_ratio = bound;
    }
    if (!ok && bad++ == 0)
      first_bad = fmt::format("{}: got {:.17g}, want {:.17g}, |diff| {:.3g} > bound {:.3g}", where,
                              got, want, diff, bound);
  }
  // A condition that holds or not (a selected set, a precondition).
  void require(bool ok, const std::string& what) {
    ++count;
    if (!ok && bad++ == 0) first_bad = what;
  }
  bool passed() const { return bad == 0 && count > 0; }
  std::string summary() const {
    return fmt::format("{}: {} elements, {} outside; max |diff| {:.3g}, max |diff|/bound {:.3g}{}",
                       name, count, bad, max_diff, max_ratio,
                       first_bad.empty() ? "" : "; first: " + first_bad);
  }
};

// Prints the check's summary (the measured numbers docs/golden.md quotes) and asserts it.
inline void expect_passed(const BoundedCheck& c) {
  fmt::print("golden: {}\n", c.summary());
  EXPECT_TRUE(c.passed()) << c.summary();
}
// A planted bug must be seen: the check fails.
inline void expect_caught(const BoundedCheck& c) {
  fmt::print("golden (planted bug): {}\n", c.summary());
  EXPECT_GT(c.bad, 0u) << "the planted bug was not seen: " << c.summary();
}

}  // namespace bufferlab::golden
