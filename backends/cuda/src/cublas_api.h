// cuBLAS, loaded on first use instead of linked. Linking it maps libcublas and the 540 MB
// libcublasLt it depends on into every process that links the CUDA backend: 80 ms at each
// start (measured here: an empty main linked to them starts in 0.08 s, 219 MB resident, against
// 0.00 s), paid by every one of the ~1,400 ctest processes of the unit, kernel and CUDA suites
// although none of them reaches cuBLAS without a GPU. The backend's LibraryContext is the one
// caller: it asks for the table when a GPU backend is built, so a machine without cuBLAS gets
// an Error naming the library instead of a loader failure at start.
#pragma once

#include "cuda_libraries.h"

namespace bufferlab::BUFFERLAB_CUDA_NS {

// cublasGemmEx's exported C signature; the header adds a C++ overload (a cudaDataType compute
// type), so decltype cannot name it.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points the backend calls. cublas_v2.h maps the names to their _v2
// symbols (cublasCreate → cublasCreate_v2); decltype takes the mapped declarations' types.
struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasSetWorkspace) set_workspace;
  decltype(&cublasSetPointerMode) set_pointer_mode;
  decltype(&cublasSetAtomicsMode) set_atomics_mode;
  decltype(&cublasSetMathMode) set_math_mode;
  CublasGemmEx gemm_ex;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// Loads cuBLAS (by its soname, through LD_LIBRARY_PATH and the loader's cache, then from the
// toolkit this was built with) and resolves every entry point, once per process; throws Error
// naming the library, the missing symbol and dlerror() when it cannot.
const CublasApi& cublas_api();

}  // namespace bufferlab::BUFFERLAB_CUDA_NS
