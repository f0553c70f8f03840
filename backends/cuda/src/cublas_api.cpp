// Loads cuBLAS with dlopen on first use (why: cublas_api.h); in the simulator the table holds
// the stand-ins of backends/cuda_sim instead.
#include "cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "bufferlab/core/error.h"
#include "bufferlab/cuda/cuda_backend.h"

#if defined(BUFFERLAB_CUDA_SIM)

namespace bufferlab::BUFFERLAB_CUDA_NS {

const CublasApi& cublas_api() {
  static const CublasApi api{&cublasCreate,         &cublasDestroy,        &cublasSetStream,
                             &cublasSetWorkspace,   &cublasSetPointerMode, &cublasSetAtomicsMode,
                             &cublasSetMathMode,    &cublasGemmEx,         &cublasGetStatusName,
                             &cublasGetStatusString};
  return api;
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

#else

namespace bufferlab::BUFFERLAB_CUDA_NS {
namespace {

// Names after cublas_v2.h's macros, so cublasCreate resolves as cublasCreate_v2.
#define BUFFERLAB_SYMBOL_NAME(name) BUFFERLAB_SYMBOL_NAME_EXPANDED(name)
#define BUFFERLAB_SYMBOL_NAME_EXPANDED(name) #name

void* open_cublas() {
  // The soname first (LD_LIBRARY_PATH: docs/gpu-runs.md points it at the GPU machine's own CUDA
  // 13), then the library of the toolkit this was built with.
  std::string tried;
  for (const char* path : {BUFFERLAB_CUBLAS_SONAME, BUFFERLAB_CUBLAS_BUILD_PATH}) {
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    tried += std::string("\n  ") + path + ": " + (why != nullptr ? why : "not found");
  }
  throw Error("the CUDA backend cannot load cuBLAS; set LD_LIBRARY_PATH to a directory with " +
              std::string(BUFFERLAB_CUBLAS_SONAME) + " (CUDA 13). Tried:" + tried);
}

template <typename Fn>
void resolve(void* library, const char* name, Fn& slot) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr)
    throw Error(std::string("cuBLAS was loaded but has no ") + name + " (" +
                BUFFERLAB_CUBLAS_SONAME + " from another CUDA major version?)");
  slot = reinterpret_cast<Fn>(symbol);
}

CublasApi load() {
  void* library = open_cublas();  // never closed: the table lives as long as the process
  CublasApi api{};
#define BUFFERLAB_RESOLVE(field, fn) resolve(library, BUFFERLAB_SYMBOL_NAME(fn), api.field)
  BUFFERLAB_RESOLVE(create, cublasCreate);
  BUFFERLAB_RESOLVE(destroy, cublasDestroy);
  BUFFERLAB_RESOLVE(set_stream, cublasSetStream);
  BUFFERLAB_RESOLVE(set_workspace, cublasSetWorkspace);
  BUFFERLAB_RESOLVE(set_pointer_mode, cublasSetPointerMode);
  BUFFERLAB_RESOLVE(set_atomics_mode, cublasSetAtomicsMode);
  BUFFERLAB_RESOLVE(set_math_mode, cublasSetMathMode);
  BUFFERLAB_RESOLVE(gemm_ex, cublasGemmEx);
  BUFFERLAB_RESOLVE(status_name, cublasGetStatusName);
  BUFFERLAB_RESOLVE(status_string, cublasGetStatusString);
#undef BUFFERLAB_RESOLVE
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  // A failed load throws out of the initializer and is tried again by the next caller.
  static const CublasApi api = load();
  return api;
}

}  // namespace bufferlab::BUFFERLAB_CUDA_NS

namespace bufferlab {

std::string cublas_unavailable_reason() {
  try {
    cuda::cublas_api();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace bufferlab

#endif
