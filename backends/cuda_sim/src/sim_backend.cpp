// The simulated backend: the CUDA backend's own code (backends/cuda/src compiled for the
// simulator) behind a layer that gives the checkers what only the backend knows — the running
// op's declared footprint and parameter string around each op call, the arena poison that
// does not count as a write — and turns an op's findings into one KernelFindings error.
#include <memory>
#include <string>
#include <type_traits>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/cuda_sim/cuda_sim_backend.h"
#include "device_memory.h"
#include "findings.h"
#include "memory_checks.h"
#include "sim_state.h"

namespace bufferlab {
namespace cuda_sim {
std::unique_ptr<Backend> make_kernel_backend();  // backends/cuda/src/cuda_backend.cpp
}  // namespace cuda_sim

namespace sim {
void poison_device(void* p, size_t bytes);  // runtime_api.cpp
}

namespace {

std::shared_ptr<std::byte> sim_allocate(uint64_t bytes) {
  void* p = nullptr;
  if (sim::device::cudaMalloc(&p, bytes == 0 ? 1 : bytes) != sim::device::cudaSuccess)
    throw Error("cuda-sim: cudaMalloc of " + std::to_string(bytes) +
                " B failed: the simulated device holds " +
                std::to_string(sim::kDeviceCapacity >> 20) + " MiB");
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                    [](std::byte* q) { sim::device::cudaFree(q); });
}

class SimBackend final : public Backend {
 public:
  std::string name() const override { return "cuda-sim"; }
  void upload(const Workspace& ws, const TensorRef& dst, const void* src) override {
    inner_->upload(ws, dst, src);
  }
  void download(const Workspace& ws, const TensorRef& src, void* dst) override {
    inner_->download(ws, src, dst);
  }
  void fill(const Workspace& ws, const TensorRef& t, uint8_t byte) override {
    inner_->fill(ws, t, byte);
  }
  void synchronize() override { inner_->synchronize(); }

#define BUFFERLAB_SIM_FORWARD(status, Type, method, Return, family, ...) \
  Return method(const Workspace& ws, const Type& op) override {          \
    return run(ws, op, [&] { return inner_->method(ws, op); });          \
  }
  BUFFERLAB_OPS(BUFFERLAB_SIM_FORWARD)
#undef BUFFERLAB_SIM_FORWARD

 protected:
  Workspace do_allocate(const Layout& layout, uint64_t weights_bytes) override {
    return Workspace(layout, sim_allocate(layout.arena_bytes()), sim_allocate(weights_bytes),
                     weights_bytes, MemorySpace::device);
  }
  // The poison of Backend::poison leaves the arena unwritten for the initialisation checker;
  // any other fill is a write.
  void fill_arena(const Workspace& ws, uint8_t byte) override {
    if (byte == kPoisonByte) {
      sim::poison_device(ws.arena_base(), ws.layout().arena_bytes());
      return;
    }
    if (sim::device::cudaMemset(ws.arena_base(), byte, ws.layout().arena_bytes()) !=
        sim::device::cudaSuccess)
      throw Error("cuda-sim: filling the arena failed");
  }

 private:
  std::unique_ptr<Backend> inner_ = cuda_sim::make_kernel_backend();

  // One op: the footprint set for its launches, its findings thrown together after it.
  template <class Op, class F>
  auto run(const Workspace& ws, const Op& op, F call) -> decltype(call()) {
    inner_->set_kernel_mutant(kernel_mutant());
    sim::set_footprint(ws, op.accesses(), op.params());
    struct Clear {
      ~Clear() { sim::clear_footprint(); }
    } clear;
    try {
      if constexpr (std::is_void_v<decltype(call())>) {
        call();
        throw_findings();
      } else {
        auto result = call();
        throw_findings();
        return result;
      }
    } catch (const sim::KernelFindings&) {
      throw;
    } catch (const Error& e) {
      // The op failed (a refused launch, a library error): its findings say why.
      std::vector<sim::Finding> findings = sim::take_findings();
      if (findings.empty()) throw;
      sim::Finding cause;
      cause.check = sim::Check::library_call;
      cause.kernel = "the op";
      cause.detail = std::string("failed: ") + e.what();
      findings.push_back(cause);
      throw sim::KernelFindings(std::move(findings));
    }
  }

  static void throw_findings() {
    std::vector<sim::Finding> findings = sim::take_findings();
    if (!findings.empty()) throw sim::KernelFindings(std::move(findings));
  }
};

}  // namespace

void set_sim_options(const SimOptions& options) { sim::options() = options; }
const SimOptions& sim_options() { return sim::options(); }
const SimCounters& sim_counters() { return sim::counters(); }
void reset_sim_counters() { sim::counters() = SimCounters{}; }

std::unique_ptr<Backend> make_cuda_sim_backend() { return std::make_unique<SimBackend>(); }

}  // namespace bufferlab
