// RUN: strata-opt %s --split-input-file --strata-plan-memory="prefetch-lead=0" | FileCheck %s

// Tests liveness-based reuse in a chain: each buffer dies after its one
// use, so three 64-byte buffers ping-pong in two slots; a kernel never
// writes over its own operand.
// CHECK-LABEL: func.func @chain()
// CHECK-SAME: exec.arena_bytes = 128 : i64
// CHECK-SAME: exec.params_bytes = 0 : i64
// CHECK: exec.input "x" {offset = [[A:[0-9]+]] : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = [[B:[0-9]+]] : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = [[A]] : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = [[B]] : i64}
func.func @chain() {
  %x = exec.input "x" : tensor<16xf32>
  %a = exec.kernel "exp"(%x) : (tensor<16xf32>) -> tensor<16xf32>
  %b = exec.kernel "exp"(%a) : (tensor<16xf32>) -> tensor<16xf32>
  %c = exec.kernel "exp"(%b) : (tensor<16xf32>) -> tensor<16xf32>
  exec.output "y" %c : tensor<16xf32>
  return
}

// -----

// Tests that a use through a view keeps the viewed buffer alive, that
// outputs live to the end (the input's slot is reused once it is dead, but
// the output's is not), and that parameters are laid out 4 KiB-aligned.
// CHECK-LABEL: func.func @views()
// CHECK-SAME: exec.arena_bytes = 192 : i64
// CHECK-SAME: exec.params_bytes = 8192 : i64
// CHECK: exec.param "w" {offset = 0 : i64
// CHECK: exec.param "v" {offset = 4096 : i64
// CHECK: exec.input "x" {offset = [[X:[0-9]+]] : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = [[A:[0-9]+]] : i64}
// CHECK: exec.view
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = [[X]] : i64}
// CHECK: exec.kernel "add"(%{{.+}}, %{{.+}}) {offset = 128 : i64}
func.func @views() {
  %w = exec.param "w" {value = dense<1.0> : tensor<16xf32>} : tensor<16xf32>
  %v = exec.param "v" {value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %x = exec.input "x" : tensor<16xf32>
  %a = exec.kernel "exp"(%x) : (tensor<16xf32>) -> tensor<16xf32>
  %av = exec.view %a : tensor<16xf32> -> tensor<4x4xf32>
  %b = exec.kernel "exp"(%w) : (tensor<16xf32>) -> tensor<16xf32>
  %bv = exec.view %b : tensor<16xf32> -> tensor<4x4xf32>
  %c = exec.kernel "add"(%av, %bv) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.output "a" %av : tensor<4x4xf32>
  exec.output "c" %c : tensor<4x4xf32>
  return
}

