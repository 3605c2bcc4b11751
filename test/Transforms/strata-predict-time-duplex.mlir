// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" | FileCheck %s
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=NODUPLEX
// The profile is parsed once: the first pass given the file records it on
// the module, a later pass given none reads the record (the duplex figures
// again), one given another file reads that one.
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" --strata-predict-time | FileCheck %s --check-prefix=ONCE
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=NODUPLEX

// Tests that host copies in both directions at once share the link's duplex
// rate (duplex_gbs 1.5 against 1 + 1 GB/s: each runs 2 / 1.5 times slower
// while the other is busy). The fetch of h (256 KiB at 1 GB/s: 262.144) is
// issued first and runs 0 -> 262.144; the write-back of x starts at 0 beside
// it: 262.144 at 1/1.333 of its rate does 196.608 of its work, the remaining
// 65.536 runs at full rate after, so it ends at 327.680 (328 rounded), the
// step's end.
// CHECK-LABEL: func.func @both
// CHECK-SAME: predicted_device_to_host_us = 262
// CHECK-SAME: predicted_host_to_device_us = 262
// CHECK-SAME: predicted_step_us = 328
// Without duplex_gbs (profile-gpu.txt: 2 GB/s to the device, 1 back) they
// overlap freely: the write-back's 262.144 sets the step.
// NODUPLEX-LABEL: func.func @both
// NODUPLEX-SAME: predicted_step_us = 262
// ONCE: module attributes {exec.machine_profile = {
// ONCE-SAME: duplex_gbs = 1.500000e+00 : f64
// ONCE-SAME: source = "{{.*}}profile-duplex.txt"
// ONCE-LABEL: func.func @both
// ONCE-SAME: predicted_step_us = 328
func.func @both() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<256x256xf32>
  %h = exec.param "h" {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %g = exec.param "g" trainable {tier = #exec.tier<host>, offset = 262144 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 262144 : i64, issue_after = -1 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.kernel "assign"(%g, %x) {issue_after = -1 : i64} : (tensor<256x256xf32>, tensor<256x256xf32>) -> ()
  exec.output "h" %hf : tensor<256x256xf32>
  return
}
