// The words for a Capacity (bufferlab/core/capacity.h), one source for `plan` and `verify`:
// the share line "arena 3.21 GiB = 2.3 % of h200's 141 GB", the `capacity` finding and the
// `capacity` object of their --json output.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bufferlab/core/capacity.h"
#include "bufferlab/core/target.h"

namespace bufferlab::cli {

// "h200's 141 GB", "gb10's 128 GB (shared with the CPU)": decimal, as the vendor states it.
std::string target_memory(const Target& target);

// "arena 3.21 GiB = 2.3 % of h200's 141 GB"; "arena 211 PiB = 1,686,869 × h200's 141 GB,
// does not fit".
std::string capacity_share(const Capacity& capacity, const Target& target);

// The finding when the arena does not fit, naming both byte counts:
// "capacity: the arena does not fit the target: it needs 237,848,554,350,484,992 B (211 PiB)
// — h200 has 141,000,000,000 B (141 GB) of device memory".
std::string capacity_finding(const Capacity& capacity, const Target& target);

// {"arena_bytes", "memory_bytes", "percent", "fits"}: the `capacity` key of `plan --json` and
// `verify --json`.
nlohmann::json capacity_json(const Capacity& capacity);

}  // namespace bufferlab::cli
