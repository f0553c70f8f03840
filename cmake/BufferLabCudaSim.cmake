# The kernel simulator (backends/cuda_sim) builds wherever Boost.Context is found (Debian's
# libboost-context-dev) and the host compiler is GCC (its ThreadSanitizer instrumentation is
# the simulator's access hook). No CUDA toolkit needed. BUFFERLAB_CUDA_SIM: AUTO (default), ON
# (fail when it cannot build), OFF.
set(BUFFERLAB_CUDA_SIM "AUTO" CACHE STRING "Build the CUDA kernel simulator backend: AUTO, ON or OFF")
set_property(CACHE BUFFERLAB_CUDA_SIM PROPERTY STRINGS AUTO ON OFF)
set(BUFFERLAB_HAVE_CUDA_SIM OFF)
if(NOT BUFFERLAB_CUDA_SIM STREQUAL "OFF")
  find_package(Boost 1.74 QUIET COMPONENTS context)
  set(_why "")
  if(NOT Boost_CONTEXT_FOUND)
    set(_why "Boost.Context not found (apt-get install libboost-context-dev)")
  elseif(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(_why "the host compiler is ${CMAKE_CXX_COMPILER_ID}, the simulator needs GCC's instrumentation")
  elseif(BUFFERLAB_SANITIZE)
    set(_why "a sanitizer build (BUFFERLAB_SANITIZE) owns the instrumentation hooks")
  endif()
  if(_why STREQUAL "")
    set(BUFFERLAB_HAVE_CUDA_SIM ON)
  elseif(BUFFERLAB_CUDA_SIM STREQUAL "ON")
    message(FATAL_ERROR "BUFFERLAB_CUDA_SIM=ON but ${_why}")
  endif()
endif()
message(STATUS "BufferLab: CUDA simulator ${BUFFERLAB_HAVE_CUDA_SIM} (BUFFERLAB_CUDA_SIM=${BUFFERLAB_CUDA_SIM})")

# The compile options of every source holding kernels for the simulator (the backend's .cu
# files, the checkers' self-test kernels, the simulator benchmarks): GCC's ThreadSanitizer
# instrumentation without its runtime (every load and store calls the simulator's hooks,
# backends/cuda_sim/src/access_hooks.cpp), no loop-to-memcpy rewriting (an explicit memcpy would
# bypass the hooks), stack-clash protection (a frame larger than the fiber stack probes it page
# by page and faults on the guard page), no FMA contraction (nvcc's choices cannot be copied:
# a stated limit), and CUDA's `#pragma unroll` and forced inlining quiet on the host.
set(BUFFERLAB_SIM_KERNEL_OPTIONS
  -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -fno-tree-loop-distribute-patterns
  -fstack-clash-protection -ffp-contract=off -Wno-unknown-pragmas -Wno-attributes)
