// The CPU implementations of the workspace ops, one free function per op family, each
// reading extents from its descriptor only. Private to the CPU backend.
#pragma once

#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab::cpu {

void fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op);

}  // namespace bufferlab::cpu
