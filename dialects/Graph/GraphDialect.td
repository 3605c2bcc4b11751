//===- GraphDialect.td - Strata graph dialect --------------*- tablegen -*-===//
//
// The graph dialect: value-semantic tensor math with static shapes, the form
// an imported ONNX model takes before training ops are added.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECTS_GRAPH_GRAPHDIALECT_TD
#define STRATA_DIALECTS_GRAPH_GRAPHDIALECT_TD

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let summary = "Value-semantic tensor math with static shapes";
  let description = [{
    The graph dialect holds a model's computation as pure tensor operations on
    statically shaped `tensor` values: matrix products, elementwise math with
    NumPy broadcasting, reductions, normalisations, and data movement
    (reshape, transpose, slice, gather, concat). It is what the ONNX importer
    produces and what autodiff, fusion and the memory planner consume.

    Every shape is known: the importer binds dynamic dimensions and folds the
    shape computations that exporters emit, so no op here computes a shape.
    Trainable state enters through `graph.param`; everything else is a
    function argument or a `graph.constant`.

    ```mlir
    func.func @main(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
      %w = graph.param "fc.weight" trainable : tensor<4x8xf32>
      %y = graph.matmul %x, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
      return %y : tensor<2x8xf32>
    }
    ```
  }];
  let cppNamespace = "::strata::graph";
  let hasConstantMaterializer = 1;
  // Attributes outside the ops: on the module (`producer`, `opset`, from
  // the ONNX model), and on function arguments and results (`name`: the
  // graph input or output's name; `grad_of`: the parameter a returned
  // gradient belongs to, --strata-autodiff).
  let discardableAttrs = (ins
    "::mlir::StringAttr":$producer,
    "::mlir::IntegerAttr":$opset,
    "::mlir::StringAttr":$name,
    "::mlir::StringAttr":$grad_of
  );
}

#endif // STRATA_DIALECTS_GRAPH_GRAPHDIALECT_TD
