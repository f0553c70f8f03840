# Test and CLI code is glue: it parses options, builds inputs, calls the libraries (core, oracle,
# backends, properties: still -O3) and checks results. At -O3 GCC spent ~70 % of such a file's
# compile time in optimisation and code generation (docs/benchmarks.md "Build time"); -O1
# compiles them ~40 % faster and costs nothing measurable at run time, because the work runs in
# the libraries. Benches are left at -O3: their same-run baselines (naive loops) live in the
# bench files. The slow exhaustive number-format checks (format conversions inlined in the
# test file) keep -O3 too. -DBUFFERLAB_GLUE_O1=OFF compiles everything at the build type's level.
option(BUFFERLAB_GLUE_O1 "Compile test and CLI glue at -O1 in optimised builds" ON)

function(bufferlab_apply_glue_optimization)
  if(NOT BUFFERLAB_GLUE_O1)
    return()
  endif()
  foreach(_t IN ITEMS bufferlab_cli bufferlab bufferlab_unit_tests bufferlab_property_tests
                      bufferlab_alloc_tests bufferlab_slow_numeric_tests bufferlab_kernel_bodies
                      bufferlab_kernel_tests bufferlab_cuda_tests)
    if(TARGET ${_t})
      # Appended after CMAKE_CXX_FLAGS_<CONFIG>: GCC takes the last -O.
      target_compile_options(${_t} PRIVATE
        $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<OR:$<CONFIG:Release>,$<CONFIG:RelWithDebInfo>>>:-O1>)
    endif()
  endforeach()
endfunction()
