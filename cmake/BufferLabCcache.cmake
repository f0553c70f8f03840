# ccache when it is installed and the user named no compiler launcher: repeated builds (other
# worktrees, branch switches, CI reruns) reuse objects. CCACHE_DISABLE=1 in the environment
# turns it off for one build (ccache then just runs the compiler); -DBUFFERLAB_CCACHE=OFF
# turns it off for a build folder. The precompiled headers need ccache's
# pch_defines,time_macros sloppiness to be cached; without it ccache compiles them uncached.
option(BUFFERLAB_CCACHE "Use ccache as the compiler launcher when it is found" ON)
if(BUFFERLAB_CCACHE)
  find_program(BUFFERLAB_CCACHE_PROGRAM ccache)
  mark_as_advanced(BUFFERLAB_CCACHE_PROGRAM)
  if(BUFFERLAB_CCACHE_PROGRAM)
    foreach(_bl_lang CXX CUDA)
      if(NOT DEFINED CMAKE_${_bl_lang}_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_${_bl_lang}_COMPILER_LAUNCHER})
        set(CMAKE_${_bl_lang}_COMPILER_LAUNCHER ${BUFFERLAB_CCACHE_PROGRAM})
      endif()
    endforeach()
  endif()
endif()
message(STATUS "BufferLab: compiler launcher '${CMAKE_CXX_COMPILER_LAUNCHER}'")
