// A backend and a workspace that holds exactly the arena tensors of some ops (no model config
// needed) and a weight pool, poisoned (NaN) so an output an op fails to write shows up. Shared by
// the kernel tests, the properties and the benches (no GoogleTest inside: errors throw).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bufferlab/core/backend.h"
#include "bufferlab/core/error.h"
#include "bufferlab/oracle/moe_ffn_harness.h"

namespace bufferlab::testing {

struct Rig {
  Backend* backend = nullptr;
  Workspace ws;

  // The arena holds every arena tensor of `ops` (each a list of accesses); the pool has
  // `pool_bytes` (place pool operands with oracle::place_in_pool first).
  Rig(Backend& b, const std::vector<std::vector<Access>>& ops, uint64_t pool_bytes) : backend(&b) {
    std::vector<Access> all;
    for (const auto& accesses : ops) all.insert(all.end(), accesses.begin(), accesses.end());
    ws = backend->allocate(oracle::ffn_footprint_layout(all), pool_bytes);
    backend->poison(ws);
  }

  // Uploads `host` into `t`; its size must be the tensor's exactly.
  template <class T>
  void put(const TensorRef& t, const std::vector<T>& host) {
    if (host.size() * sizeof(T) != t.bytes())
      throw Error("Rig::put " + t.to_string() + ": host copy holds " +
                  std::to_string(host.size() * sizeof(T)) + " bytes, the tensor " +
                  std::to_string(t.bytes()));
    backend->upload(ws, t, host.data());
  }
  // Waits for the backend, then downloads `t`.
  template <class T>
  std::vector<T> get(const TensorRef& t) {
    std::vector<T> host(t.bytes() / sizeof(T));
    backend->synchronize();
    backend->download(ws, t, host.data());
    return host;
  }
};

}  // namespace bufferlab::testing
