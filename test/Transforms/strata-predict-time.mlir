// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: not strata-opt %s --strata-predict-time="profile=%S/missing.txt" 2>&1 | FileCheck %s --check-prefix=MISSING

// Tests the cost model against hand-computed figures (microseconds):
//   matmul 2x256 * 256x256: 262144 FLOPs; the cube root of M*N*K (51) is
//     small, 1 GFLOP/s: 262.144 + 1 launch                       = 263.144
//   exp over 512 elements at 10 ns + 1 launch                    =   6.120
//   add over 65536 elements at 1 ns + 1 launch + 5 parallel      =  71.536
//   compute                                                      = 340.800
//   SSD read of 256 KiB (one request) at 0.5 GB/s + 100 latency  = 624.288
//   SSD write of 256 KiB (one request) at 0.25 GB/s + 100        = 1148.576
//   host copy of 256 KiB at 1 GB/s                               = 262.144
//   step = the sum = 2375.808; lower bound = the busiest (SSD)   = 1772.864
// CHECK: func.func @main() attributes {exec.predicted = {
// CHECK-SAME: predicted_compute_us = 341
// CHECK-SAME: predicted_host_link_us = 262
// CHECK-SAME: predicted_lower_bound_us = 1773
// CHECK-SAME: predicted_ssd_link_us = 1773
// CHECK-SAME: predicted_step_us = 2376

// MISSING: error: cannot open the machine profile '{{.*}}missing.txt'
func.func @main() {
  %x = exec.input "x" : tensor<2x256xf32>
  %w = exec.param "w" trainable {tier = "ssd", value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %h = exec.param "h" {tier = "host", value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %wf = exec.kernel "copy"(%w) : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %y = exec.kernel "matmul"(%x, %wf) : (tensor<2x256xf32>, tensor<256x256xf32>) -> tensor<2x256xf32>
  %e = exec.kernel "exp"(%y) : (tensor<2x256xf32>) -> tensor<2x256xf32>
  %hf = exec.kernel "copy"(%h) : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %s = exec.kernel "add"(%hf, %hf) : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.kernel "assign"(%w, %s) : (tensor<256x256xf32>, tensor<256x256xf32>) -> ()
  exec.output "e" %e : tensor<2x256xf32>
  return
}
