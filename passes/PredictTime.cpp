//===- PredictTime.cpp - Cost model of the planned program ----------------===//

#include "passes/Passes.h"

#include "dialects/Exec/ExecDialect.h"
#include "runtime/profile/MachineProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>

#define DEBUG_TYPE "strata-predict-time"

namespace strata {
#define GEN_PASS_DEF_PREDICTTIMEPASS
#include "passes/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// Streaming kernels larger than this many elements run on several threads.
constexpr int64_t kParallelGrain = 16384;
/// The SSD store's stripe (tiers::SsdOptions::stripeBytes).
constexpr double kSsdStripeBytes = 1 << 20;

int64_t elements(Type type) {
  return cast<ShapedType>(type).getNumElements();
}

uint64_t bytesOf(Type type) {
  auto shaped = cast<ShapedType>(type);
  Type et = shaped.getElementType();
  uint64_t element = et.isInteger(1) ? 1 : (et.getIntOrFloatBitWidth() + 7) / 8;
  return static_cast<uint64_t>(shaped.getNumElements()) * element;
}

/// Where a stored value lives: "device", "host" or "ssd".
StringRef tierOf(Value v) {
  while (auto view = v.getDefiningOp<exec::ViewOp>())
    v = view.getInput();
  if (auto p = v.getDefiningOp<exec::ParamOp>())
    return p.getTier();
  if (auto s = v.getDefiningOp<exec::SwapSpaceOp>())
    return s.getTier();
  return "device";
}

struct PredictTimePass
    : public strata::impl::PredictTimePassBase<PredictTimePass> {
  using PredictTimePassBase::PredictTimePassBase;

  void runOnOperation() override {
    MachineProfile machine;
    std::string error;
    if (!profile.empty() && !machine.read(profile, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      predict(func, machine);
  }

  static double matmulSeconds(exec::KernelOp k, const MachineProfile &m) {
    auto lhs = cast<ShapedType>(k.getInputs()[0].getType());
    auto out = cast<ShapedType>(k.getResult(0).getType());
    ArrayRef<int64_t> ints = k.getInts();
    bool ta = !ints.empty() && ints[0];
    int64_t K = lhs.getRank() == 1 ? lhs.getDimSize(0)
                : ta ? lhs.getDimSize(lhs.getRank() - 2)
                     : lhs.getDimSize(lhs.getRank() - 1);
    double flops = 2.0 * out.getNumElements() * K;
    // The operands' typical dimension (cube root of M*N*K) picks the rate.
    double n = std::cbrt(flops / 2.0);
    double rate = n < 128   ? m.matmulSmallGflops
                  : n < 512 ? m.matmulMediumGflops
                            : m.matmulLargeGflops;
    return flops / (rate * 1e9);
  }

  void predict(func::FuncOp func, const MachineProfile &m) {
    double compute = 0, hostLink = 0, ssdLink = 0;
    static const llvm::StringSet<> transcendental = {
        "exp", "log", "tanh", "erf", "sigmoid", "gelu", "gelu_grad",
        "softmax", "log_softmax", "cross_entropy", "cross_entropy_grad",
        "pow", "sin", "cos", "update_adamw", "update_adalomo", "layer_norm",
        "layer_norm_grad"};
    static const llvm::StringSet<> movement = {
        "transpose", "slice", "slice_grad", "concat", "broadcast", "gather",
        "gather_grad", "trilu"};
    for (Operation &op : func.getBody().front()) {
      auto k = dyn_cast<exec::KernelOp>(op);
      if (!k)
        continue;
      StringRef name = k.getKernel();
      // Transfers between tiers.
      if (name == "copy" || name == "assign" || name == "store") {
        Value stored = k.getInputs()[0];
        StringRef tier = tierOf(stored);
        double bytes = bytesOf(stored.getType());
        if (tier == "ssd") {
          bool read = name == "copy";
          // Below a stripe the store issues one request; above, many in
          // flight across stripes and drives.
          double rate = bytes < kSsdStripeBytes
                            ? (read ? m.ssdSmallReadGBs : m.ssdSmallWriteGBs)
                            : (read ? m.ssdReadGBs : m.ssdWriteGBs);
          ssdLink += m.ssdLatencyUs * 1e-6 + bytes / (rate * 1e9);
          continue;
        }
        if (tier == "host") {
          hostLink += bytes / (m.copyGBs * 1e9);
          continue;
        }
      }
      double seconds = m.launchUs * 1e-6;
      if (name == "matmul") {
        seconds += matmulSeconds(k, m);
      } else {
        // Streaming kernels: the larger of what they read and write.
        int64_t n = 0;
        for (Value v : k.getInputs())
          n = std::max(n, elements(v.getType()));
        for (Value v : k.getResults())
          n = std::max(n, elements(v.getType()));
        double perElement = transcendental.contains(name)
                                ? m.transcendentalNsPerElement
                            : movement.contains(name) ? m.movementNsPerElement
                                                      : m.simpleNsPerElement;
        seconds += n * perElement * 1e-9;
        // Kernels past the runtime's grain are split across threads.
        if (n > kParallelGrain)
          seconds += m.parallelLaunchUs * 1e-6;
      }
      compute += seconds;
    }
    double step = compute + hostLink + ssdLink;
    double bound = std::max({compute, hostLink, ssdLink});
    OpBuilder b(func.getContext());
    auto us = [&](double s) {
      return b.getI64IntegerAttr(static_cast<int64_t>(std::llround(s * 1e6)));
    };
    func->setAttr("exec.predicted",
                  b.getDictionaryAttr({
                      b.getNamedAttr("predicted_step_us", us(step)),
                      b.getNamedAttr("predicted_compute_us", us(compute)),
                      b.getNamedAttr("predicted_host_link_us", us(hostLink)),
                      b.getNamedAttr("predicted_ssd_link_us", us(ssdLink)),
                      b.getNamedAttr("predicted_lower_bound_us", us(bound)),
                  }));
  }
};

} // namespace
