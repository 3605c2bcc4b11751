// RUN: strata-opt %s --strata-append-loss | FileCheck %s
// RUN: not strata-opt %s --strata-append-loss=loss=output 2>&1 | FileCheck %s --check-prefix=OUTPUT

// Tests that causal-lm adds a labels input shaped like the token ids and
// returns the mean cross-entropy over all B*T positions.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x3xi64> {graph.name = "input_ids"}, %[[LABELS:.+]]: tensor<2x3xi64> {graph.name = "labels"}) -> (tensor<f32> {graph.name = "loss"})
// CHECK: %[[L:.+]] = graph.reshape %{{.+}} : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: %[[Y:.+]] = graph.reshape %[[LABELS]] : tensor<2x3xi64> -> tensor<6xi64>
// CHECK: %[[LOSS:.+]] = graph.cross_entropy %[[L]], %[[Y]] : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
// CHECK: return %[[LOSS]] : tensor<f32>
// OUTPUT: error: --loss output: the model's first output must be a float scalar, it is 'tensor<2x3x5xf32>'
func.func @main(%ids: tensor<2x3xi64> {graph.name = "input_ids"}) -> (tensor<2x3x5xf32> {graph.name = "logits"}) {
  %w = graph.param "wte" trainable : tensor<5x5xf32>
  %e = graph.gather %w, %ids axis = 0 : (tensor<5x5xf32>, tensor<2x3xi64>) -> tensor<2x3x5xf32>
  return %e : tensor<2x3x5xf32>
}
