// Placeholder until the CPU Mamba-2 kernels land (cpu_ssd_*.cpp): every entry point refuses.
#include "bufferlab/core/error.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {
[[noreturn]] void not_yet(const char* op) {
  throw Error(std::string("cpu: ") + op + " has no kernel yet");
}
}  // namespace
void mamba2_conv(const Workspace&, const Mamba2ConvOp&) { not_yet("mamba2_conv1d"); }
void ssd_chunk(const Workspace&, const SsdChunkOp&, Mutant) { not_yet("ssd_chunk"); }
void mamba2_recurrent(const Workspace&, const Mamba2RecurrentOp&) { not_yet("mamba2_recurrent"); }
void mamba2_gated_norm(const Workspace&, const Mamba2GatedNormOp&) { not_yet("mamba2_gated_norm"); }
}  // namespace bufferlab::cpu
