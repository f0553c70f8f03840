// Printable names of element types.
#include "bufferlab/core/dtype.h"

namespace bufferlab {

const char* to_string(DType t) {
  switch (t) {
    case DType::u8:
      return "u8";
    case DType::i8:
      return "i8";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::u32:
      return "u32";
    case DType::i64:
      return "i64";
    case DType::fp8_e4m3:
      return "fp8_e4m3";
    case DType::fp4_e2m1x2:
      return "fp4_e2m1x2";
  }
  return "?";
}

}  // namespace bufferlab
