// RUN: strata-opt %s --split-input-file --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s

// Tests what the cost model charges the kernels that do not move every
// element they name (profile.txt: simple kernels 1 ns an element, movement
// 2 ns, 1 us a launch, 5 us more past 16384 elements).

// A reduction reads each element once, a third of the simple kernel's
// traffic (an add's two reads and a write): (65536 + 1) / 3 = 21845.667
// ns, + 1 launch + 5 parallel = 27.846 us (the add over as many elements
// costs 71.536 in strata-predict-time.mlir).
// CHECK-LABEL: func.func @norm
// CHECK-SAME: predicted_compute_us = 28 : i64
func.func @norm() {
  %g = exec.input "g" {offset = 0 : i64} : tensor<256x256xf32>
  %s = exec.kernel "reduce_sum_square"(%g) {ints = array<i64: 0, 1>, offset = 262144 : i64} : (tensor<256x256xf32>) -> tensor<f32>
  exec.output "s" %s : tensor<f32>
  return
}

// -----

// A gather reads the rows it gathers: 8 rows of 64 from a 4096-row table,
// 512 elements at 2 ns + 1 launch = 2.024 us (the table's 262144 elements
// would be 525.288).
// CHECK-LABEL: func.func @embed
// CHECK-SAME: predicted_compute_us = 2 : i64
func.func @embed() {
  %w = exec.input "w" {offset = 0 : i64} : tensor<4096x64xf32>
  %i = exec.input "i" {offset = 1048576 : i64} : tensor<8xi64>
  %e = exec.kernel "gather"(%w, %i) {ints = array<i64: 0>, offset = 1048640 : i64} : (tensor<4096x64xf32>, tensor<8xi64>) -> tensor<8x64xf32>
  exec.output "e" %e : tensor<8x64xf32>
  return
}

// -----

// Its gradient zeroes the table, a write an element (a third of the simple
// kernel's traffic), and adds the rows in: (262144 / 3 + 512) ns + 1
// launch + 5 parallel = 93.893 us.
// CHECK-LABEL: func.func @embed_grad
// CHECK-SAME: predicted_compute_us = 94 : i64
func.func @embed_grad() {
  %g = exec.input "g" {offset = 0 : i64} : tensor<8x64xf32>
  %i = exec.input "i" {offset = 2048 : i64} : tensor<8xi64>
  %d = exec.kernel "gather_grad"(%g, %i) {ints = array<i64: 0>, offset = 4096 : i64} : (tensor<8x64xf32>, tensor<8xi64>) -> tensor<4096x64xf32>
  exec.output "d" %d : tensor<4096x64xf32>
  return
}
