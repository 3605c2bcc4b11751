//===- HalfValues.cpp - Stored weights between fp32 and fp16/bf16 ---------===//

#include "passes/training/HalfValues.h"

#include "runtime/support/Half.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"

#include <cstring>

using namespace mlir;

namespace {

/// The raw bytes of `attr` (one element when `splat`), if in memory.
std::optional<ArrayRef<char>> rawData(ElementsAttr attr, bool &splat) {
  splat = false;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    return blob->getData();
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    splat = dense.isSplat();
    return dense.getRawData();
  }
  return std::nullopt;
}

/// `attr`'s `n` elements of `from` bytes each converted by `convert` into
/// a new resource of element type `to` (`toBytes` each) named `name`.
template <typename Convert>
std::optional<ElementsAttr> convertValues(ElementsAttr attr, size_t fromBytes,
                                          Type to, size_t toBytes,
                                          StringRef name, Convert convert) {
  auto type = cast<ShapedType>(attr.getType());
  bool splat = false;
  std::optional<ArrayRef<char>> raw = rawData(attr, splat);
  int64_t n = type.getNumElements();
  if (!raw || raw->size() != (splat ? fromBytes : fromBytes * n))
    return std::nullopt;
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(n * toBytes, toBytes);
  MutableArrayRef<char> out = blob.getMutableData();
  for (int64_t i = 0; i < n; ++i)
    convert(raw->data() + (splat ? 0 : fromBytes * i),
            out.data() + i * toBytes);
  return ElementsAttr(DenseResourceElementsAttr::get(
      RankedTensorType::get(type.getShape(), to), name, std::move(blob)));
}

} // namespace

std::optional<ElementsAttr> strata::widenValues(ElementsAttr attr,
                                                StringRef name) {
  auto element = dyn_cast<FloatType>(attr.getElementType());
  if (!element || element.getWidth() != 16)
    return std::nullopt;
  bool brain = element.isBF16();
  return convertValues(attr, 2, Builder(attr.getContext()).getF32Type(), 4,
                       name, [brain](const char *in, char *out) {
                         uint16_t bits;
                         std::memcpy(&bits, in, 2);
                         float v = brain ? BFloat16::toFloat(bits)
                                         : Half::toFloat(bits);
                         std::memcpy(out, &v, 4);
                       });
}

std::optional<ElementsAttr>
strata::narrowValues(ElementsAttr attr, FloatType low, StringRef name) {
  if (!attr.getElementType().isF32() || !(low.isBF16() || low.isF16()))
    return std::nullopt;
  bool brain = low.isBF16();
  return convertValues(
      attr, 4, low, 2, name, [brain](const char *in, char *out) {
        float v;
        std::memcpy(&v, in, 4);
        uint16_t bits = brain ? BFloat16::fromFloat(v) : Half::fromFloat(v);
        std::memcpy(out, &bits, 2);
      });
}
