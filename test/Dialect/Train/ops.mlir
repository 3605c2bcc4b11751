// RUN: strata-opt %s | strata-opt | FileCheck %s

// Tests that train ops round-trip, with and without a clipping scale.
// CHECK-LABEL: func.func @updates
// CHECK: %[[M:.+]] = train.state "w.exp_avg" : tensor<4xf32>
// CHECK: train.update_sgd %{{.+}}, %{{.+}} {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<4xf32>
// CHECK: train.update_momentum %{{.+}}, %{{.+}}, %{{.+}} scale %{{.+}} : tensor<f32> {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<4xf32>
// CHECK: train.update_adamw %{{.+}}, %{{.+}}, %[[M]], %{{.+}} {beta1
func.func @updates(%w: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<f32>) {
  %m = train.state "w.exp_avg" : tensor<4xf32>
  %v = train.state "w.exp_avg_sq" : tensor<4xf32>
  train.update_sgd %w, %g {lr = 0.1 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  train.update_momentum %w, %g, %m scale %s : tensor<f32> {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>
  train.update_adamw %w, %g, %m, %v {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.01 : f64} : tensor<4xf32>
  return
}
