// The machine-readable form of an oracle::AgreementReport (`bufferlab compare --json` and the
// dump manifest): every comparison with its metrics, bound and first bad element. Non-finite
// metrics are written as the strings "Infinity" / "NaN" (JSON has no such numbers).
#pragma once

#include <nlohmann/json.hpp>

#include "bufferlab/oracle/agreement_report.h"

namespace bufferlab::cli {

nlohmann::json report_json(const oracle::AgreementReport& report);

}  // namespace bufferlab::cli
