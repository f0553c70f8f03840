// BUFFERLAB_HD marks functions usable on host and device. It expands to
// __host__ __device__ only under nvcc, so core stays free of CUDA headers.
#pragma once

#if defined(__CUDACC__)
#define BUFFERLAB_HD __host__ __device__
#else
#define BUFFERLAB_HD
#endif
