// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=GPU

// Tests that two data-parallel ranks on one machine (strata.ranks_per_node)
// each get half of what they share. On the CPU backend's profile that is
// the cores: the kernels of strata-predict-time.mlir take twice as long
// (matmul 2 * 262.144 + 1, exp 512 * 20 + 1, add 65536 * 2 + 1 + 5, exp
// 65536 * 20 + 1 + 5: 1990.320) and the host copy runs at 0.5 GB/s
// (524.288). A GPU's compute is its own: 1002.160 as alone.
// CHECK: exec.predicted = {
// CHECK-SAME: predicted_compute_us = 1990
// CHECK-SAME: predicted_host_link_us = 524
// GPU: exec.predicted = {
// GPU-SAME: predicted_compute_us = 1002
module attributes {strata.ranks_per_node = 2 : i64} {
func.func @main() {
  %x = exec.input "x" {offset = 262144 : i64} : tensor<2x256xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<ssd>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %h = exec.param "h" {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %wf = exec.kernel "copy"(%w) {offset = 0 : i64, issue_after = -1 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %y = exec.kernel "matmul"(%x, %wf) {offset = 266240 : i64} : (tensor<2x256xf32>, tensor<256x256xf32>) -> tensor<2x256xf32>
  %e = exec.kernel "exp"(%y) {offset = 270336 : i64} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 274432 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %s = exec.kernel "add"(%hf, %hf) {offset = 536576 : i64} : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.kernel "assign"(%w, %s) : (tensor<256x256xf32>, tensor<256x256xf32>) -> ()
  %u = exec.kernel "exp"(%hf) {offset = 798720 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %w2 = exec.kernel "copy"(%w) {offset = 1060864 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.output "e" %e : tensor<2x256xf32>
  exec.output "u" %u : tensor<256x256xf32>
  exec.output "w2" %w2 : tensor<256x256xf32>
  return
}
}
