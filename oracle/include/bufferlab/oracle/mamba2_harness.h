// Drives one Mamba-2 call through any Backend with the core interface only: conv1d over all
// rows, then per sequence the chunked SSD stages (cumsum, bmm, scan; each sequence carves
// ssd_scratch from its start, §4.6) or the recurrence, then the gated norm — reading back each
// stage's stored inputs (right before it ran) and outputs, sequence by sequence (the next
// sequence overwrites the scratch).
#pragma once

#include <cstdint>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/oracle/mamba2.h"

namespace bufferlab::oracle {

enum class Mamba2Path { chunked, recurrent };

struct Mamba2Plan {
  Mamba2Dims dims;
  Mamba2Path path = Mamba2Path::chunked;
  Mamba2ConvOp conv;
  std::vector<Mamba2ChunkOp> chunk;  // cumsum, bmm, scan per sequence (chunked path)
  Mamba2RecurrentOp recurrent;       // recurrent path (all sequences in one op)
  Mamba2GatedNormOp norm;
  uint64_t pool_bytes = 0;

  std::vector<Access> accesses() const;
};

// `nc` = the sizing's §4.6 chunk count when the workspace is a real one; 0 = cdiv(L, 64).
Mamba2Plan plan_mamba2(const Mamba2Dims& dims, Mamba2Path path, uint64_t nc = 0);
Workspace allocate_mamba2_footprint(Backend& backend, const Mamba2Plan& plan);

struct Mamba2Run {
  Mamba2Path path = Mamba2Path::chunked;
  std::vector<uint16_t> xbc;         // bf16 [rows, d_xbc] after conv1d
  std::vector<uint16_t> conv_state;  // bf16 [sequences, d_xbc, K − 1] after conv1d
  struct Sequence {
    // Compacted to [H, chunks, 64] (dt, dA_cumsum) and [chunks, G, 64, 64] (CB).
    std::vector<float> dt, da, cb;
    std::vector<float> dt_before_scan, da_before_scan, cb_before_scan;  // "intact" checks
    std::vector<float> state_in, state;                                 // f32 [H, P, N]
  };
  std::vector<Sequence> sequences;     // chunked path
  std::vector<float> state_in, state;  // f32 [sequences, H, P, N] (both paths)
  std::vector<uint16_t> y;             // bf16 [rows, d_inner] (attn_output)
  std::vector<uint16_t> normed;        // bf16 [rows, d_inner] (norm_output)
};

Mamba2Run run_mamba2(Backend& backend, const Workspace& ws, const Mamba2Plan& plan,
                     const Mamba2Inputs& in);

}  // namespace bufferlab::oracle
