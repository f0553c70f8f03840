// Backend: one implementation of every workspace op over ONE Layout. CpuBackend (Eigen +
// OpenMP) and CudaBackend implement it; the FP64 oracle stands beside them, independent.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "bufferlab/core/error.h"
#include "bufferlab/core/layout.h"
#include "bufferlab/core/ops/fused_add_rmsnorm.h"
#include "bufferlab/core/workspace.h"

namespace bufferlab {

// Thrown when a backend cannot run here (no GPU, no driver); callers report "skipped".
class BackendUnavailable : public Error {
 public:
  explicit BackendUnavailable(const std::string& why) : Error(why) {}
};

// Every op descriptor a backend executes. Later op families append to this variant.
using OpDescriptor = std::variant<FusedAddRmsNormOp>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Allocates the arena for `layout` and a weight pool of `weights_bytes`, and zero-fills
  // norm_unit_w (spec §3 #24). Nothing else is initialised: callers poison or upload.
  Workspace allocate(const Layout& layout, uint64_t weights_bytes);

  virtual void upload(const Workspace& ws, const TensorRef& dst, const void* src) = 0;
  virtual void download(const Workspace& ws, const TensorRef& src, void* dst) = 0;
  // Sets every byte of the tensor to `byte`.
  virtual void fill(const Workspace& ws, const TensorRef& t, uint8_t byte) = 0;
  // Fills the whole arena with kPoisonByte so an output an op fails to write shows up as
  // NaN; norm_unit_w keeps its zeros (an allocation invariant, not an output).
  void poison(const Workspace& ws);
  // Waits for all work issued so far; surfaces asynchronous errors as Error.
  virtual void synchronize() = 0;

  virtual void fused_add_rmsnorm(const Workspace& ws, const FusedAddRmsNormOp& op) = 0;

  // Dispatches any descriptor to its method.
  void execute(const Workspace& ws, const OpDescriptor& op);

 protected:
  virtual Workspace do_allocate(const Layout& layout, uint64_t weights_bytes) = 0;
  // Sets every byte of the arena to `byte`.
  virtual void fill_arena(const Workspace& ws, uint8_t byte) = 0;

 private:
  void zero_unit_weight(const Workspace& ws);
};

// The poison byte: 0xFF makes every BF16/FP32 element a NaN, so an unwritten output fails.
inline constexpr uint8_t kPoisonByte = 0xFF;

}  // namespace bufferlab
