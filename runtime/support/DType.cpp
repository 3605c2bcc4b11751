// DType.cpp - Element types.

#include "runtime/support/DType.h"

namespace strata {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I16:
    return "int16";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::U16:
    return "uint16";
  case DType::U32:
    return "uint32";
  case DType::U64:
    return "uint64";
  case DType::Bool:
    return "bool";
  }
  return "invalid";
}

bool isValidDType(uint8_t value) { return value >= 1 && value <= 13; }

bool isFloatDType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

} // namespace strata
