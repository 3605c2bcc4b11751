// RUN: strata-opt %s --split-input-file --verify-diagnostics --strata-offload-optimizer="place-updates=auto cpu-mem=8192 profile=%S/Inputs/profile.txt"
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=auto profile=%S/Inputs/profile-handoff.txt" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COST
// RUN: not strata-opt %s --split-input-file --strata-offload-optimizer=place-updates=gpu 2>&1 | FileCheck %s --check-prefix=MODE

// The diagnostics of --strata-offload-optimizer in its automatic mode (the
// ones of place-updates=cpu: strata-offload-optimizer.mlir), and its option error.
// MODE: error: --place-updates: 'gpu' is not one of device, cpu, auto
// With a machine whose CPU job hand-off costs more than the update saves:
// COST: remark: 1 update stay on the device: the cost model predicts the device path faster on this machine

// Tests an update the CPU would run faster (profile.txt) whose landing
// gradient would take the host tensors (two pages for w and its state)
// past the host budget: it stays on the device.
// expected-remark @below {{1 update stay on the device: their gradients would take host memory past --cpu-mem}}
func.func @over_host_budget() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %f1 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %f1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %g) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %f2 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm = exec.kernel "copy"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%f2, %gw, %fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w, %f2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m, %fm) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %gx = exec.kernel "exp"(%g) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  exec.output "gx" %gx : tensor<2x4xf32>
  return
}
