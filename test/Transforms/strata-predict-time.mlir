// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-contention.txt" | FileCheck %s --check-prefix=SLOW
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-handoff.txt" | FileCheck %s --check-prefix=HANDOFF
// RUN: strata-opt %s --strata-predict-time="profile=%S/Inputs/profile-gpu.txt" | FileCheck %s --check-prefix=GPU
// RUN: not strata-opt %s --strata-predict-time="profile=%S/missing.txt" 2>&1 | FileCheck %s --check-prefix=MISSING

// Tests the cost model and its replay of the runtime's schedule against
// hand-computed figures (microseconds). Costs:
//   k0 fetch of w, 256 KiB from SSD (one piece: the single-request
//      rate, 0.5 GB/s) + 100                                    = 624.288
//   k1 matmul 2x256 * 256x256: 262144 FLOPs, the cube root of M*N*K
//      (51) is small, 1 GFLOP/s: 262.144 + 1 launch             = 263.144
//   k2 exp over 512 elements at 10 ns + 1 launch                 =   6.120
//   k3 fetch of h, 256 KiB from host at 1 GB/s                   = 262.144
//   k4 add over 65536 elements at 1 ns + 1 launch + 5 parallel   =  71.536
//   k5 write-back of w, 256 KiB to SSD at 0.25 GB/s + 100        = 1148.576
//   k6 exp over 65536 elements at 10 ns + 1 + 5                  = 661.360
//   k7 fetch of w again, as k0                                   = 624.288
// Replay: k0 is issued at the start (issue_after = -1) on the read queue
// and ends at 624.288; k1 reads its bytes, so it waits: 624.288 -> 887.432;
// k2 -> 893.552; k3 (a host copy) runs on the compute thread -> 1155.696;
// k4 -> 1227.232; k5 goes on the write queue -> 2375.808 while k6 (no
// shared bytes) computes -> 1888.592; k7, on the read queue, reads what k5
// writes, so it starts when k5 ends: 2375.808 -> 3000.096, the step's end.
// One after another it would be compute 1002.160 + host 262.144 + SSD
// 2397.152 = 3661.456; the lower bound is the busiest resource, SSD reads
// (k0 + k7 = 1248.576; writes are 1148.576).
// CHECK: func.func @main() attributes {exec.predicted = {
// CHECK-SAME: predicted_compute_us = 1002
// CHECK-SAME: predicted_device_to_host_us = 0
// CHECK-SAME: predicted_host_link_us = 262
// CHECK-SAME: predicted_host_to_device_us = 262
// CHECK-SAME: predicted_lower_bound_us = 1249
// CHECK-SAME: predicted_serial_us = 3661
// CHECK-SAME: predicted_ssd_link_us = 2397
// CHECK-SAME: predicted_step_us = 3000

// Tests that kernels beside a busy transfer queue run 1 + overlap_slowdown
// times slower (here twice as slow): k6 starts at 1227.232 with the write
// queue busy until 2375.808; 1148.576 of that at half speed does 574.288 of
// its 661.360, the remaining 87.072 runs at full speed: k6 ends at
// 2462.880, after k5, so k7 runs 2462.880 -> 3087.168. Nothing else
// overlaps a busy queue (k1 waits for it).
// SLOW: exec.predicted = {
// SLOW-SAME: predicted_compute_us = 1002
// SLOW-SAME: predicted_step_us = 3087

// Tests the hand-offs: with a 100 us queue round trip, a transfer handed to
// an idle worker starts 50 later, and so does one that waited for the other
// queue, and so does a kernel that waited for a transfer. k0 runs 50 ->
// 674.288; k1 starts 724.288 -> 987.432; k2 -> 993.552; k3 -> 1255.696;
// k4 -> 1327.232; k5 starts 1377.232 -> 2525.808; k6 -> 1988.592; k7 waits
// for k5: 2575.808 -> 3200.096, the step's end.
// HANDOFF: exec.predicted = {
// HANDOFF-SAME: predicted_step_us = 3200

// Tests a GPU profile: the host copy k3 runs on the host-to-device copy
// engine at its own rate (2 GB/s: 131.072), beside the compute, but after
// the SSD read k0 (0 -> 624.288), whose bytes cross the GPU's host link
// too and hold that engine: 624.288 -> 755.360 (host-to-device busy:
// 131.072 + 1248.576 of SSD reads). k4 waits for it but starts later
// anyway (893.552 -> 965.088); k5 on the write queue (and the
// device-to-host engine) 965.088 -> 2113.664; k6 -> 1626.448; k7 waits for
// k5: 2113.664 -> 2737.952, the step's end. In program order the SSD time
// counts once: 3530.
// GPU: exec.predicted = {
// GPU-SAME: predicted_device_to_host_us = 1149
// GPU-SAME: predicted_host_to_device_us = 1380
// GPU-SAME: predicted_serial_us = 3530
// GPU-SAME: predicted_step_us = 2738
// GPU-SAME: exec.predicted_spans = array<f64: 3.000000e+00, 0.000000e+00, 0.000000e+00, 6.242880e+02, {{.*}}, 1.000000e+00, 3.000000e+00, 6.242880e+02, 755.3599

// MISSING: error: cannot open the machine profile '{{.*}}missing.txt'
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

// Tests the SSD rate of transfers the store splits at 1 MiB stripes: one
// piece moves at the single-request rate (0.5 GB/s): 100 + 2097.152; four
// in flight at up to four times it, capped by the bulk rate (1.5 GB/s):
// 100 + 2796.203; 5093.355 in all.
// CHECK-LABEL: func.func @pieces
// CHECK-SAME: predicted_ssd_link_us = 5093
func.func @pieces() {
  %a = exec.param "a" trainable {tier = #exec.tier<ssd>, offset = 0 : i64, value = dense<1.0> : tensor<256x1024xf32>} : tensor<256x1024xf32>
  %b = exec.param "b" trainable {tier = #exec.tier<ssd>, offset = 1048576 : i64, value = dense<1.0> : tensor<1024x1024xf32>} : tensor<1024x1024xf32>
  %fa = exec.kernel "copy"(%a) {offset = 0 : i64} : (tensor<256x1024xf32>) -> tensor<256x1024xf32>
  %fb = exec.kernel "copy"(%b) {offset = 1048576 : i64} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  exec.output "a" %fa : tensor<256x1024xf32>
  exec.output "b" %fb : tensor<1024x1024xf32>
  return
}

// Tests a fused elementwise chain, tanh(a) + b over 65536 elements: it
// reads two and writes one (3 x 65536 values at 1/3 ns: 65.536), its tanh
// costs the transcendental rate beyond a simple kernel's (10 - 2/3 ns:
// 611.669), the add nothing more; + 1 launch + 5 parallel = 683.205.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: predicted_compute_us = 683
func.func @fused() {
  %a = exec.input "a" {offset = 0 : i64} : tensor<256x256xf32>
  %b = exec.input "b" {offset = 262144 : i64} : tensor<256x256xf32>
  %y = exec.kernel "elementwise"(%a, %b) {offset = 524288 : i64, ints = array<i64: 2, 19, 0, -1, 0, 1, 2, 1, 0, 3>} : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  exec.output "y" %y : tensor<256x256xf32>
  return
}
