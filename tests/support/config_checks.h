// EXPECT_CONFIG_EQ(actual, expected): two model configs equal, the failure message listing the
// differing fields (a JSON patch between their normalized forms, config_difference).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/config_json.h"
#include "bufferlab/core/model_config.h"

namespace bufferlab::testing {

inline std::string config_difference(const ModelConfig& actual, const ModelConfig& expected) {
  return nlohmann::json::diff(to_normalized_json(expected), to_normalized_json(actual)).dump();
}

}  // namespace bufferlab::testing

#define EXPECT_CONFIG_EQ(actual, expected) \
  EXPECT_TRUE((actual) == (expected))      \
      << "differences: " << ::bufferlab::testing::config_difference((actual), (expected))
