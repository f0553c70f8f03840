# Unity builds: CMake compiles each target's sources in batches, one translation unit per
# batch. A test, CLI or oracle file spends most of its compile time instantiating and
# generating the same templates (fmt, nlohmann/json, CLI11, gtest, RapidCheck, std) that its
# neighbours instantiate again; in one batch they are instantiated once (eight CLI files:
# 31 s compiled one by one, 7 s as one batch; docs/benchmarks.md "Build time"). Every file
# still compiles on its own (-DBUFFERLAB_UNITY_BUILD=OFF), and nothing a file defines at
# namespace scope may collide with a neighbour's: file-local helpers that two files need are
# one shared helper, not two anonymous copies.
option(BUFFERLAB_UNITY_BUILD "Compile the targets' sources in batches (unity build)" ON)
set(BUFFERLAB_UNITY_BATCH_SIZE 8 CACHE STRING "Sources per unity batch")
set(BUFFERLAB_UNITY_SKIP "" CACHE STRING "Targets to leave out of the unity build (;-list)")

# Applied once every target exists (end of the top-level CMakeLists.txt). Targets not defined
# in this configuration (no CUDA, no tests, ...) are skipped. Left out: the CPU and CUDA
# backends (kernels at -O3 whose time is optimisation, not headers: 17 CPU files took 15 s in
# all; each kernel file keeps its own Eigen / Shape aliases), and the CUDA sources.
function(bufferlab_apply_unity_build)
  if(NOT BUFFERLAB_UNITY_BUILD)
    return()
  endif()
  foreach(_t IN ITEMS bufferlab_core bufferlab_oracle bufferlab_properties
                      bufferlab_cli bufferlab_kernel_bodies bufferlab_unit_tests
                      bufferlab_property_tests bufferlab_alloc_tests bufferlab_slow_tests
                      bufferlab_slow_numeric_tests bufferlab_format_xcheck_tests
                      bufferlab_kernel_tests bufferlab_cuda_tests bufferlab_bench)
    if(TARGET ${_t} AND NOT _t IN_LIST BUFFERLAB_UNITY_SKIP)
      set_target_properties(${_t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE
                                                             ${BUFFERLAB_UNITY_BATCH_SIZE})
    endif()
  endforeach()
endfunction()
