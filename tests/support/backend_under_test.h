// The backend a kernel test body runs on. Every kernel test body (tests/kernels/) is written
// once against `Backend&` and compiled once; each kernel test executable links the bodies with
// one backend_under_test_<name>.cpp that names its backend ("cpu", "cuda"; later "cuda-sim").
// A backend that cannot run here (no GPU, no driver) makes every body SKIP with the reason.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "bufferlab/core/backend.h"
#include "cpu_backend.h"  // testing::cpu_backend(): a second backend for tests that need one

namespace bufferlab::testing {

// The name of this executable's backend under test.
const char* backend_under_test_name();
// The backend under test, created once per process; throws BackendUnavailable with the reason
// when it cannot run here.
Backend& backend_under_test();
// "" when the backend under test can run here, else why not.
std::string backend_under_test_unavailable_reason();

// Base fixture of every kernel test body: skips with the reason when the backend under test
// cannot run, else gives the body `backend()`.
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = backend_under_test_unavailable_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
  static Backend& backend() { return backend_under_test(); }
  static bool on_cpu() { return std::string(backend_under_test_name()) == "cpu"; }
};

// Sets a kernel mutant on `backend` for the guard's scope (the backend under test is shared by
// the whole process: a failing assertion must not leave the mutant on).
class MutantScope {
 public:
  MutantScope(Backend& backend, Mutant mutant) : backend_(backend) {
    backend_.set_kernel_mutant(mutant);
  }
  ~MutantScope() { backend_.set_kernel_mutant(Mutant::none); }
  MutantScope(const MutantScope&) = delete;
  MutantScope& operator=(const MutantScope&) = delete;

 private:
  Backend& backend_;
};

}  // namespace bufferlab::testing
