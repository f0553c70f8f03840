// `sinkhorn --range L --iters N --svg FILE`: the row-sum error of each case against the
// iteration count (log10 y axis, linear x axis), each case's Birkhoff–Hopf bound dashed in
// the case's colour, and the frontier's targets 1e-3 and 1e-6 as reference lines.
#pragma once

#include <string>

#include "bufferlab/oracle/mhc_sinkhorn_trace.h"

namespace bufferlab::cli {

std::string sinkhorn_svg(const oracle::SinkhornTrace& trace);

}  // namespace bufferlab::cli
