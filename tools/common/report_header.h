// The first two lines of the `plan` and `verify` tables: the model and the run shape, in the
// same words and alignment.
#pragma once

#include <cstdio>
#include <string>

#include "bufferlab/core/run_shape.h"

namespace bufferlab::cli {

void print_model_and_shape(std::FILE* out, const std::string& model, const RunShape& shape);

}  // namespace bufferlab::cli
