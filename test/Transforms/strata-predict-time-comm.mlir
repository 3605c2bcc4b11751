// RUN: strata-opt %s --strata-assign-queues --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s
// RUN: strata-opt %s --strata-assign-queues --strata-predict-time="profile=%S/Inputs/profile-gpu-comm.txt" | FileCheck %s --check-prefix=LINK

// Tests a collective on a GPU whose collectives cross its host link
// (comm_on_host_link 1): the host copy of h (256 KiB at 2 GB/s, 131.072)
// runs 0 -> 131.072 on its copy engine; the exp 0 -> 6.120 (512 elements
// at 10 ns + 1 launch); the all-reduce of its 2048 bytes over 2 ranks at
// 1 GB/s + 1 us (3.048) shares the link with the copy, at half its rate:
// 6.120 -> 12.216. Its 3.048 count on the link in both directions.
// Without the flag (and at the default 10 GB/s + 20 us) it takes 20.205.
// CHECK: exec.predicted = {
// CHECK-SAME: predicted_comm_us = 20
// CHECK-SAME: predicted_device_to_host_us = 0
// CHECK-SAME: predicted_host_to_device_us = 131
// CHECK-SAME: predicted_step_us = 131
// LINK: exec.predicted = {
// LINK-SAME: predicted_comm_us = 6
// LINK-SAME: predicted_device_to_host_us = 3
// LINK-SAME: predicted_host_to_device_us = 134
// LINK-SAME: predicted_step_us = 131
func.func @main() {
  %x = exec.input "x" {offset = 262144 : i64} : tensor<2x256xf32>
  %h = exec.param "h" {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 524288 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %g = exec.kernel "exp"(%x) {offset = 0 : i64} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  %m = exec.kernel "all_reduce"(%g) {offset = 4096 : i64, ints = array<i64: 2>} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  exec.output "m" %m : tensor<2x256xf32>
  exec.output "hf" %hf : tensor<256x256xf32>
  return
}
