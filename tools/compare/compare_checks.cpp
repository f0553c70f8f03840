// The checks every compare runner makes before it allocates: the op's footprint fits the
// sizing's buffers, and the run fits this machine (compare_ops.h).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bufferlab/core/error.h"
#include "compare/compare_ops.h"

namespace bufferlab::cli {
namespace {

// What one compare run may cost this machine before it is refused with a clear error instead
// of running out of memory or computing for hours: host memory, as a multiple `held` of the
// weight bytes (their host copy, the backend's pool, the copies read back for judging, the
// oracle's arrays — measured: experts 9.4 GiB peak for 2.13 GiB of weights and operands,
// lm-head 4.5 GiB for 0.58 GiB, on qwen3-next-80b at 64 tokens), and the FP64 oracle's
// multiply-adds (2^37 ≈ 1.4e11: a few minutes; qwen3-next-80b at 64 tokens needs 2e10).
constexpr double kMaxRunBytes = 12.0 * (uint64_t{1} << 30);
constexpr double kMaxOracleMacs = static_cast<double>(uint64_t{1} << 37);

}  // namespace

void require_affordable(const std::string& what, double weight_bytes, double held,
                        double oracle_macs, const CompareSetup& s) {
  const double gib = static_cast<double>(uint64_t{1} << 30);
  if (held * weight_bytes <= kMaxRunBytes && oracle_macs <= kMaxOracleMacs) return;
  throw Error(fmt::format(
      "{} on {} at {} tokens needs about {:.1f} GiB of host memory ({:.1f} GiB of weights and "
      "operands, "
      "held about {:g} times) and {:.3g} oracle multiply-adds; the limits are {:.0f} GiB and "
      "{:.3g}: use fewer --tokens",
      what, s.model_label, s.tokens, held * weight_bytes / gib, weight_bytes / gib, held,
      oracle_macs, kMaxRunBytes / gib, kMaxOracleMacs));
}

void require_footprint_fits(const std::string& params, const std::vector<Access>& accesses,
                            const Layout& layout, const std::string& model_label, uint64_t tokens) {
  for (const Access& a : accesses) {
    const TensorRef& t = a.tensor;
    if (t.space != Space::arena) continue;
    const uint64_t have = layout.entry(t.buffer).bytes;
    if (t.offset + t.bytes() > have)
      throw Error(
          fmt::format("{} needs {} bytes of {} ({}), but the sizing of {} at {} tokens "
                      "gives it {} bytes",
                      params, t.offset + t.bytes(), buffer_name(t.buffer), t.to_string(),
                      model_label, tokens, have));
  }
}

}  // namespace bufferlab::cli
