// Oracle modes (docs/spec/numerics.md, preamble): `exact` evaluates an op's definition in FP64 from
// the inputs it is given; `faithful` rounds at the points where the backends store a value
// (BF16/FP8 intermediates) and stays in FP64 everywhere else. Backends are asserted against
// `faithful`; the exact-vs-faithful difference is reported, never asserted.
#pragma once

namespace bufferlab::oracle {

enum class Mode { exact, faithful };

inline const char* to_string(Mode m) { return m == Mode::exact ? "exact" : "faithful"; }

}  // namespace bufferlab::oracle
