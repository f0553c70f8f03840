# Precompiled headers for the heavy third-party headers (and the standard headers most files
# use). Parsing gtest, rapidcheck, nlohmann/json, CLI11 and Eigen again in every translation
# unit was a large share of each test, property and tool file's compile time. Each group of
# targets with the same compile flags shares one PCH (REUSE_FROM): GCC only accepts a PCH
# built with the same flags, and silently parses the real header when it does not match, so
# a mismatch costs time, never correctness. -DBUFFERLAB_PCH=OFF builds without them (e.g. to
# check that every file includes what it uses).
option(BUFFERLAB_PCH "Precompile the heavy third-party headers" ON)

set(BUFFERLAB_PCH_STD <algorithm> <array> <cmath> <cstddef> <cstdint> <cstring> <functional>
    <limits> <map> <memory> <optional> <sstream> <stdexcept> <string> <string_view> <utility>
    <variant> <vector>)

# bufferlab_precompile_headers(HEADERS <h>... TARGETS <t>...): the first of TARGETS that
# exists owns a PCH of HEADERS, the other existing ones reuse it. TARGETS not defined in this
# configuration (no CUDA, no tests, ...) are skipped.
function(bufferlab_precompile_headers)
  cmake_parse_arguments(ARG "" "" "HEADERS;TARGETS" ${ARGN})
  if(NOT BUFFERLAB_PCH)
    return()
  endif()
  set(_owner "")
  foreach(_t IN LISTS ARG_TARGETS)
    if(NOT TARGET ${_t})
      continue()
    endif()
    if(NOT _owner)
      set(_owner ${_t})
      target_precompile_headers(${_t} PRIVATE ${ARG_HEADERS})
    else()
      target_precompile_headers(${_t} REUSE_FROM ${_owner})
    endif()
  endforeach()
endfunction()

# The PCH groups, applied once every target exists (end of the top-level CMakeLists.txt).
# Test targets are named here so tests/CMakeLists.txt stays free of build-speed plumbing.
function(bufferlab_apply_precompiled_headers)
  bufferlab_precompile_headers(TARGETS bufferlab_oracle
    HEADERS ${BUFFERLAB_PCH_STD} <fmt/format.h> <nlohmann/json.hpp>)
  bufferlab_precompile_headers(TARGETS bufferlab_properties
    HEADERS ${BUFFERLAB_PCH_STD} <fmt/format.h> <nlohmann/json.hpp> <rapidcheck.h>)
  bufferlab_precompile_headers(TARGETS bufferlab_cpu
    HEADERS ${BUFFERLAB_PCH_STD} <Eigen/Core>)
  bufferlab_precompile_headers(TARGETS bufferlab_cli
    HEADERS ${BUFFERLAB_PCH_STD} <fmt/format.h> <nlohmann/json.hpp> <CLI/CLI.hpp>)
  # Test executables share flags (bufferlab_test_support): one PCH for all of them.
  bufferlab_precompile_headers(TARGETS bufferlab_unit_tests bufferlab_property_tests
      bufferlab_alloc_tests bufferlab_slow_numeric_tests bufferlab_cuda_tests
      bufferlab_kernel_bodies bufferlab_kernel_tests
    HEADERS ${BUFFERLAB_PCH_STD} <filesystem> <gtest/gtest.h> <nlohmann/json.hpp> <rapidcheck.h>)
  bufferlab_precompile_headers(TARGETS bufferlab_bench
    HEADERS ${BUFFERLAB_PCH_STD} <benchmark/benchmark.h>)
endfunction()
