// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s

// Tests that the compute thread's wait for a CPU update whose operands are
// on the SSD is told apart: the job is done once the drives have read its
// operands and written them back. The first exp (a 1 us launch and 16
// elements at 10 ns: 1.16) makes a gradient, stored to its landing buffer
// on the compute thread (64 B at 1 GB/s: 1.224); the update's job reads
// its parameter and state from the SSD (100.128 each: 1.224 -> 201.48),
// runs (0.016) and writes them back (100.256 each: 201.496 -> 402.008).
// The second gradient (exp, to 2.384) is stored into the same landing
// buffer, so its store waits for the job: 399.624 of waiting, all of it
// for a job with SSD operands, and the step ends at 402.072. (No queues
// are given: the steps take their natural ones and the waits are derived.)
// CHECK-DAG: predicted_wait_cpu_us = 400
// CHECK-DAG: predicted_wait_cpu_ssd_us = 400
// CHECK-DAG: predicted_step_us = 402
func.func @main() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<4x4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<ssd>, offset = 0 : i64, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {tier = #exec.tier<ssd>, offset = 4096 : i64, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %lb = exec.swap_space "lb" {tier = #exec.tier<host>} : tensor<4x4xf32>
  %g = exec.kernel "exp"(%x) {offset = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "store"(%lb, %g) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "update_momentum"(%w, %lb, %m) {floats = array<f64: 1.000000e-01, 9.000000e-01, 0.000000e+00>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %g2 = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "store"(%lb, %g2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "e" %g2 : tensor<4x4xf32>
  return
}
