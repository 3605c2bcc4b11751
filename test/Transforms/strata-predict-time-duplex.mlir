// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" | FileCheck %s
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=NODUPLEX
// The profile is parsed once: the first pass given the file records it on
// the module, a later pass given none reads the record (the duplex figures
// again), one given another file reads that one.
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" --strata-predict-time | FileCheck %s --check-prefix=ONCE
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-duplex.txt" --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=NODUPLEX

// Tests that host copies in both directions at once share the link's duplex
// rate (duplex_gbs 1.5 against 1 + 1 GB/s: each runs 2 / 1.5 times slower
// while the other is busy, whichever was issued first). The fetch of h and
// the write-back of x (256 KiB at 1 GB/s each: 262.144) both start at 0 and
// run together at 1/1.333 of their rates, so both end at 349.525 (350
// rounded), the step's end: 512 KiB in 349.5 us, the duplex 1.5 GB/s. (The
// fetch, issued first, used to keep its full rate: 45 GB/s from a 40 GB/s
// link on the RTX 4090 profile.)
// CHECK-LABEL: func.func @both
// CHECK-SAME: predicted_device_to_host_us = 262
// CHECK-SAME: predicted_host_to_device_us = 262
// CHECK-SAME: predicted_step_us = 350
// Without duplex_gbs (profile-gpu.txt: 2 GB/s to the device, 1 back) they
// overlap freely: the write-back's 262.144 sets the step.
// NODUPLEX-LABEL: func.func @both
// NODUPLEX-SAME: predicted_step_us = 262
// ONCE: module attributes {exec.machine_profile = {
// ONCE-SAME: duplex_gbs = 1.500000e+00 : f64
// ONCE-SAME: source = "{{.*}}profile-duplex.txt"
// ONCE-LABEL: func.func @both
// ONCE-SAME: predicted_step_us = 350
func.func @both() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<256x256xf32>
  %h = exec.param "h" {tier = #exec.tier<host>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %g = exec.param "g" trainable {tier = #exec.tier<host>, offset = 262144 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 262144 : i64, issue_after = -1 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.kernel "assign"(%g, %x) {issue_after = -1 : i64} : (tensor<256x256xf32>, tensor<256x256xf32>) -> ()
  exec.output "h" %hf : tensor<256x256xf32>
  return
}

// An SSD transfer holds its direction's copy engine (staged through host
// memory) and shares the link with a host copy the other way as a host
// copy does, over the whole time it holds the engine. The fetch of h from
// the SSD (256 KiB in one stripe at the single-request 0.5 GB/s, plus
// 100 us of latency: 624.288) is issued first and runs 0 -> 624.288; the
// write-back of x (262.144) runs beside it at 1/1.333 of its rate and ends
// at 349.525, which holds the fetch's engine until 711.669 (712 rounded),
// the step's end. Without duplex_gbs the write-back runs at full rate and
// the fetch sets the step (624).
// CHECK-LABEL: func.func @ssd_beside
// CHECK-SAME: predicted_step_us = 712
// NODUPLEX-LABEL: func.func @ssd_beside
// NODUPLEX-SAME: predicted_step_us = 624
func.func @ssd_beside() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<256x256xf32>
  %h = exec.param "h" {tier = #exec.tier<ssd>, offset = 0 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %g = exec.param "g" trainable {tier = #exec.tier<host>, offset = 262144 : i64, value = dense<1.0> : tensor<256x256xf32>} : tensor<256x256xf32>
  %hf = exec.kernel "copy"(%h) {offset = 262144 : i64, issue_after = -1 : i64} : (tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.kernel "assign"(%g, %x) {issue_after = -1 : i64} : (tensor<256x256xf32>, tensor<256x256xf32>) -> ()
  exec.output "h" %hf : tensor<256x256xf32>
  return
}
