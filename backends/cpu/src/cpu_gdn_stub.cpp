// Placeholder until the CPU GDN kernels land (cpu_gdn_*.cpp): every entry point refuses.
#include "bufferlab/core/error.h"
#include "cpu_ops.h"

namespace bufferlab::cpu {
namespace {
[[noreturn]] void not_yet(const char* op) {
  throw Error(std::string("cpu: ") + op + " has no kernel yet");
}
}  // namespace
void gdn_conv(const Workspace&, const GdnConvOp&) { not_yet("gdn_conv1d"); }
void gdn_gates(const Workspace&, const GdnGatesOp&) { not_yet("gdn_gates"); }
void gdn_chunk(const Workspace&, const GdnChunkOp&, Mutant) { not_yet("gdn_chunk"); }
void gdn_recurrent(const Workspace&, const GdnRecurrentOp&) { not_yet("gdn_recurrent"); }
void gdn_gated_norm(const Workspace&, const GdnGatedNormOp&) { not_yet("gdn_gated_norm"); }
}  // namespace bufferlab::cpu
