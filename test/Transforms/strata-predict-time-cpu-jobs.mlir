// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-ssd-duplex.txt" | FileCheck %s --check-prefix=DUPLEX

// Tests that a CPU job's SSD staging shares the drives with the other
// direction as SSD transfers do. Two CPU updates (a compute kernel between
// them makes them two jobs), each reading its parameter and state from the
// SSD into staging and writing them back: a read is 100 latency + 64 B at
// 0.5 GB/s = 100.128 an operand, 200.256 a job; a write 100 + 64 B at 0.25
// GB/s = 100.256, 200.512 a job. Job A reads 0 -> 200.256, updates (0.016)
// and writes 200.272 -> 400.784. Job B's read is issued behind A's, from
// 200.256 -> 400.512, and its write follows its update: 400.784 ->
// 601.296, the step's end.
// CHECK: predicted_step_us = 601
// With the duplex slowdowns (1: twice as slow while both directions run),
// job B's read, issued at 200.256, meets A's write (200.528 of its work
// left then) and each slows the other: the read's 200.256 take 400.512, to
// 600.768, while the write moves 200.256 of its work; the write's last
// 0.272 run alone, to 601.04. B's update ends at 600.784 and its write,
// with the reads done, runs 601.04 -> 801.552. (A slowdown that held only
// for the transfer issued second would end A's write at 400.784 and the
// step at 701.)
// DUPLEX-DAG: predicted_ssd_read_us = 401
// DUPLEX-DAG: predicted_ssd_write_us = 401
// DUPLEX-DAG: predicted_step_us = 802
func.func @main() {
  %g = exec.input "g" {offset = 0 : i64} : tensor<4x4xf32>
  %w1 = exec.param "w1" trainable {tier = #exec.tier<ssd>, offset = 0 : i64, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m1 = exec.param "w1.m" state {tier = #exec.tier<ssd>, offset = 4096 : i64, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %w2 = exec.param "w2" trainable {tier = #exec.tier<ssd>, offset = 8192 : i64, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m2 = exec.param "w2.m" state {tier = #exec.tier<ssd>, offset = 12288 : i64, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  exec.kernel "update_momentum"(%w1, %g, %m1) {floats = array<f64: 1.000000e-01, 9.000000e-01, 0.000000e+00>, queue = #exec.queue<cpu>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %e = exec.kernel "exp"(%g) {queue = #exec.queue<compute>, offset = 64 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%w2, %g, %m2) {floats = array<f64: 1.000000e-01, 9.000000e-01, 0.000000e+00>, queue = #exec.queue<cpu>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "e" %e : tensor<4x4xf32>
  return
}
