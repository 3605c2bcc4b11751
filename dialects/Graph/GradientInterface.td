//===- GradientInterface.td - Reverse-mode gradient rules --*- tablegen -*-===//

#ifndef STRATA_DIALECTS_GRAPH_GRADIENTINTERFACE_TD
#define STRATA_DIALECTS_GRAPH_GRADIENTINTERFACE_TD

include "mlir/IR/OpBase.td"

def Graph_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    The reverse-mode rule of an op: given the gradient of the loss with
    respect to the op's result, build (at the builder's insertion point) the
    gradients with respect to its operands. Autodiff (`--strata-autodiff`)
    calls it for every op between the parameters and the loss, in reverse
    order, and sums the contributions of values used more than once.
  }];
  let cppNamespace = "::strata::graph";
  let methods = [
    InterfaceMethod<[{
        Builds one gradient per operand into `operandGrads` (a null Value
        where the operand gets none: integer operands, conditions, indices).
        `resultGrad` has the result's type.
      }],
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Value":$resultGrad,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // STRATA_DIALECTS_GRAPH_GRADIENTINTERFACE_TD
