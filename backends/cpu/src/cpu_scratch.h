// The CPU backend's fixed working memory (placeholder until the GEMM kernels define it):
// allocated once when the backend starts, never inside execute().
#pragma once

namespace bufferlab::cpu {

struct Scratch {};

}  // namespace bufferlab::cpu
