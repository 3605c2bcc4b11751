// RUN: strata-opt %s --split-input-file --strata-low-copies | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-low-copies --strata-place-tiers="place-params=host place-states=host" --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=0" | FileCheck %s --check-prefix=HOST

// Tests that the casts of a master to bf16 (forward and backward readers,
// one through a view) become one stored bf16 copy, rounded to nearest even
// (1.00390625 is halfway between two bf16 values and rounds to the even
// one, 1.0; 3.0 is exact), that the update writes it as its last operand
// (ints[1] = 1, after the scale), and that another read of the master in
// fp32 (the gather) stays. With parameters on the host (HOST) the copy
// is placed there too, fetched for its readers, and the CPU update writes
// it where it lives, with no write-back.
// CHECK-LABEL: func.func @copied
// CHECK: %[[W:.+]] = exec.param "w" trainable
// CHECK-NEXT: %[[C:.+]] = exec.param "w.bf16" {copy_of = "w", value = dense_resource<w.bf16> : tensor<1x2xbf16>} : tensor<1x2xbf16>
// CHECK-NOT: "cast"(%[[W]])
// CHECK: exec.kernel "gather"(%[[W]]
// CHECK: exec.kernel "matmul"(%{{.+}}, %[[C]])
// CHECK: exec.view %[[C]]
// CHECK: exec.kernel "update_sgd"(%[[W]], %{{.+}}, %{{.+}}, %[[C]]) {floats = array<f64: 1.000000e-01, 0.000000e+00>, ints = array<i64: 1, 1>}
// The bf16 bits after the resource's alignment word: 0x3f80 (1.0) and
// 0x4040 (3.0), little-endian.
// CHECK: w.bf16: "0x02000000803F4040"
// HOST-LABEL: func.func @copied
// HOST: exec.param "w.bf16" {copy_of = "w", tier = #exec.tier<host>
// HOST: exec.kernel "update_sgd"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {{.+}} : (tensor<1x2xf32>, tensor<1x2xf32>, tensor<f32>, tensor<1x2xbf16>) -> ()
// HOST-NEXT: exec.output "y"
func.func @copied() {
  %x = exec.input "x" : tensor<3x1xbf16>
  %i = exec.input "i" : tensor<2xi64>
  %s = exec.input "s" : tensor<f32>
  %w = exec.param "w" trainable {value = dense<[[1.00390625, 3.0]]> : tensor<1x2xf32>} : tensor<1x2xf32>
  %e = exec.kernel "gather"(%w, %i) {ints = array<i64: 0>} : (tensor<1x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %c = exec.kernel "cast"(%w) : (tensor<1x2xf32>) -> tensor<1x2xbf16>
  %y = exec.kernel "matmul"(%x, %c) {ints = array<i64: 0, 0>} : (tensor<3x1xbf16>, tensor<1x2xbf16>) -> tensor<3x2xbf16>
  %v = exec.view %c : tensor<1x2xbf16> -> tensor<2xbf16>
  %d = exec.kernel "exp"(%v) {strata.backward} : (tensor<2xbf16>) -> tensor<2xbf16>
  %g = exec.kernel "exp"(%w) {strata.backward} : (tensor<1x2xf32>) -> tensor<1x2xf32>
  exec.kernel "update_sgd"(%w, %g, %s) {floats = array<f64: 0.1, 0.0>, ints = array<i64: 1>} : (tensor<1x2xf32>, tensor<1x2xf32>, tensor<f32>) -> ()
  exec.output "y" %y : tensor<3x2xbf16>
  exec.output "d" %d : tensor<2xbf16>
  exec.output "e" %e : tensor<2x2xf32>
  return
}

// -----

// Tests that a cast read after the update (an update fused into the
// backward pass before a reader of the old weights) is kept, and so are
// casts to two different types, and a frozen parameter's cast.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: copy_of
// CHECK: exec.kernel "cast"(%{{.+}}) : (tensor<2xf32>) -> tensor<2xbf16>
// CHECK: exec.kernel "update_sgd"(%{{[^,]+}}, %{{[^,]+}}) {
// CHECK: exec.kernel "cast"
// CHECK: exec.kernel "cast"
// CHECK: exec.kernel "update_sgd"(%{{[^,]+}}, %{{[^,]+}}) {
// CHECK: exec.kernel "cast"
func.func @kept() {
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  %c = exec.kernel "cast"(%w) : (tensor<2xf32>) -> tensor<2xbf16>
  %g = exec.kernel "exp"(%w) {strata.backward} : (tensor<2xf32>) -> tensor<2xf32>
  exec.kernel "update_sgd"(%w, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<2xf32>, tensor<2xf32>) -> ()
  %late = exec.kernel "exp"(%c) {strata.backward} : (tensor<2xbf16>) -> tensor<2xbf16>
  exec.output "late" %late : tensor<2xbf16>
  %u = exec.param "u" trainable {value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  %b = exec.kernel "cast"(%u) : (tensor<2xf32>) -> tensor<2xbf16>
  %h = exec.kernel "cast"(%u) : (tensor<2xf32>) -> tensor<2xf16>
  exec.kernel "update_sgd"(%u, %u) {floats = array<f64: 0.1, 0.0>} : (tensor<2xf32>, tensor<2xf32>) -> ()
  exec.output "b" %b : tensor<2xbf16>
  exec.output "h" %h : tensor<2xf16>
  %f = exec.param "f" {value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  %fc = exec.kernel "cast"(%f) : (tensor<2xf32>) -> tensor<2xbf16>
  exec.output "fc" %fc : tensor<2xbf16>
  return
}
