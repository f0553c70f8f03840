// Element types of workspace tensors. Sizes in bytes; packed FP4 counts two per byte.
#pragma once

#include <cstdint>
#include <string>

namespace bufferlab {

enum class DType { u8, i8, bf16, f32, f64, i32, u32, i64, fp8_e4m3, fp4_e2m1x2 };

constexpr uint64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::u8:
    case DType::i8:
    case DType::fp8_e4m3:
    case DType::fp4_e2m1x2:
      return 1;
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
    case DType::u32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
  }
  return 0;
}

const char* to_string(DType t);

}  // namespace bufferlab
