// RUN: strata-opt %s --split-input-file --strata-predict-time="profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-predict-time="profile=%S/Inputs/profile-net.txt" | FileCheck %s --check-prefix=NET

// Tests that an all-reduce over more ranks than a machine holds
// (strata.ranks_per_node) also crosses the machines' network. Four ranks,
// 2048 bytes (a ring moves 2 * 3/4 of them, 3072): on one machine 20 us
// + 3072 bytes at comm_gbs 10 (20.3); on two of two ranks at the lesser
// of comm_gbs and net_gbs (by default 12.5: 10) after both fixed costs
// (20 + 50: 70.3); with net_gbs 0.5 and net_latency_us 100, 126.1.
// CHECK-LABEL: func.func @one_machine
// CHECK-SAME: predicted_comm_us = 20 :
// CHECK-LABEL: func.func @two_machines
// CHECK-SAME: predicted_comm_us = 70 :
// NET-LABEL: func.func @one_machine
// NET-SAME: predicted_comm_us = 20 :
// NET-LABEL: func.func @two_machines
// NET-SAME: predicted_comm_us = 126 :
module attributes {strata.ranks_per_node = 4 : i64} {
func.func @one_machine() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<2x256xf32>
  %m = exec.kernel "all_reduce"(%x) {offset = 4096 : i64, ints = array<i64: 4>} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  exec.output "m" %m : tensor<2x256xf32>
  return
}
}

// -----

module attributes {strata.ranks_per_node = 2 : i64} {
func.func @two_machines() {
  %x = exec.input "x" {offset = 0 : i64} : tensor<2x256xf32>
  %m = exec.kernel "all_reduce"(%x) {offset = 4096 : i64, ints = array<i64: 4>} : (tensor<2x256xf32>) -> tensor<2x256xf32>
  exec.output "m" %m : tensor<2x256xf32>
  return
}
}
