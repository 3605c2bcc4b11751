//===- StrataDialect.td - Markers shared by every Strata dialect -*- tablegen -*-===//
//
// The `strata` dialect has no ops: it declares the discardable attributes
// that passes put on ops of any dialect (graph ops before lowering, exec
// kernels after) to say which part of the training step an op belongs to.
// Each has one accessor (StrataDialect.h); nothing reads them by string.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_STRATA_STRATADIALECT_TD
#define STRATA_DIALECTS_STRATA_STRATADIALECT_TD

include "mlir/IR/DialectBase.td"
include "mlir/IR/CommonAttrConstraints.td"

def Strata_Dialect : Dialect {
  let name = "strata";
  let summary = "Markers for the part of the training step an op belongs to";
  let description = [{
    ```mlir
    %g = graph.matmul %dy, %w {strata.backward} : ...
    exec.kernel "update_adamw"(%w, %g, %m, %v) {strata.optimizer} : ...
    ```

    - `strata.backward`: the op belongs to the backward pass (set by
      --strata-autodiff, kept by lowering, set on fetches and
      recomputations the tier planner inserts for the backward pass).
    - `strata.optimizer`: the op belongs to the optimizer step
      (--strata-attach-optimizer).
    - `strata.recomputed`: a forward op rerun in the backward pass
      (--strata-place-tiers).
    - `strata.seed`: the gradient seed of the loss (--strata-autodiff).
    - `strata.norm_pass`: an op of the first backward pass of two-pass
      gradient clipping (--strata-attach-optimizer).
    - `strata.ranks_per_node`: on the module, how many data-parallel ranks
      share one machine (--strata-data-parallel); the cost model divides
      the machine's shared figures (its CPU, memory bandwidth, SSDs) among
      them.
  }];
  let cppNamespace = "::strata";
  let discardableAttrs = (ins
    UnitAttr:$backward,
    UnitAttr:$optimizer,
    UnitAttr:$recomputed,
    UnitAttr:$seed,
    UnitAttr:$norm_pass,
    "::mlir::IntegerAttr":$ranks_per_node
  );
}

#endif // STRATA_DIALECTS_STRATA_STRATADIALECT_TD
