// backend_under_test() for one kernel test executable: BUFFERLAB_BACKEND_UNDER_TEST (a compile
// definition set per executable in tests/CMakeLists.txt) names the backend.
#include "backend_under_test.h"

#include <memory>

#include "bufferlab/backends/backend_factory.h"

#ifndef BUFFERLAB_BACKEND_UNDER_TEST
#error "define BUFFERLAB_BACKEND_UNDER_TEST to the backend's name"
#endif

namespace bufferlab::testing {
namespace {

struct Created {
  std::unique_ptr<Backend> backend;
  std::string unavailable;
};

const Created& created() {
  static const Created c = [] {
    Created r;
    try {
      r.backend = make_backend(BUFFERLAB_BACKEND_UNDER_TEST);
    } catch (const BackendUnavailable& e) {
      r.unavailable = e.what();
    }
    return r;
  }();
  return c;
}

}  // namespace

const char* backend_under_test_name() { return BUFFERLAB_BACKEND_UNDER_TEST; }

std::string backend_under_test_unavailable_reason() { return created().unavailable; }

Backend& backend_under_test() {
  const Created& c = created();
  if (!c.backend) throw BackendUnavailable(c.unavailable);
  return *c.backend;
}

}  // namespace bufferlab::testing
