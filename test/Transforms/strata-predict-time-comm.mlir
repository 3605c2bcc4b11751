// RUN: strata-opt %s --strata-assign-queues --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s
// RUN: strata-opt %s --strata-assign-queues --strata-predict-time="profile=%S/Inputs/profile-gpu-comm.txt" | FileCheck %s --check-prefix=LINK

// Tests a collective on a GPU whose collectives cross its host link
// (comm_on_host_link 1): the exp runs 0 -> 6.120 (512 elements at 10 ns +
// 1 launch); the all-reduce of its 2048 bytes over 2 ranks at 1 GB/s + 1 us
// runs 6.120 -> 9.168 and holds both copy engines, so the host copy of h
// (256 KiB at 2 GB/s, 131.072) starts at 9.168 and ends the step at
// 140.240; its 3.048 count on the link in both directions. Without the flag
// (and at the default 10 GB/s + 20 us) the copy starts when issued, after
// the exp: 6.120 -> 137.192.
// CHECK: exec.predicted = {
// CHECK-SAME: predicted_host_to_device_us = 131
// CHECK-SAME: predicted_step_us = 137
// LINK: exec.predicted = {
// LINK-SAME: predicted_comm_us = 3
// LINK-SAME: predicted_device_to_host_us = 3
// LINK-SAME: predicted_host_to_device_us = 134
// LINK-SAME: predicted_step_us = 140
func.func @main() {
  %x = exec.input "x" {offset = 262144 : i64} : tensor<2x256xf32>
  %h = exec.param "h" {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %g = exec.kernel "exp"(%x) {offset = 0 : i64} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  %m = exec.kernel "all_reduce"(%g) {offset = 4096 : i64, ints = array<i64: 2>} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 8192 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.output "m" %m : tensor<2x256xf32>
  exec.output "hf" %hf : tensor<256x256xf32>
  return
}
