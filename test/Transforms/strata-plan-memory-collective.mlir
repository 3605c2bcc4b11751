// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=0 prefetch-window=0" | FileCheck %s --check-prefix=NONE
// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=1 profile=%S/Inputs/profile-gpu-comm.txt" | FileCheck %s

// Tests that a collective's input keeps its bytes while the collective
// runs: under profile-gpu-comm.txt the all-reduce of %g (16 KiB over 2
// ranks at 1 GB/s + 1 us, 17.4 us) starts when %g is made, 42 us in, and
// runs beside %c (an exp of 4096 elements, 42 us), so %c cannot take %g's
// bytes (it would wait for the all-reduce) and takes new ones; %d, after
// it, takes %x's.

// Without the timing, %g is dead after its all-reduce and %c takes its
// bytes.
// NONE-LABEL: func.func @main()
// NONE: exec.input "x" {offset = 0 : i64}
// NONE: exec.kernel "exp"(%{{.+}}) {offset = [[G:[0-9]+]] : i64}
// NONE: exec.kernel "all_reduce"
// NONE: exec.kernel "exp"(%{{.+}}) {offset = [[G]] : i64}

// CHECK-LABEL: func.func @main()
// CHECK: exec.input "x" {offset = 0 : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 16384 : i64}
// CHECK: exec.kernel "all_reduce"(%{{.+}}) {ints = array<i64: 2>, offset = 32768 : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 49152 : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 0 : i64}
func.func @main() {
  %x = exec.input "x" : tensor<4096xf32>
  %g = exec.kernel "exp"(%x) : (tensor<4096xf32>) -> tensor<4096xf32>
  %m = exec.kernel "all_reduce"(%g) {ints = array<i64: 2>} : (tensor<4096xf32>) -> tensor<4096xf32>
  %c = exec.kernel "exp"(%x) : (tensor<4096xf32>) -> tensor<4096xf32>
  %d = exec.kernel "exp"(%c) : (tensor<4096xf32>) -> tensor<4096xf32>
  exec.output "m" %m : tensor<4096xf32>
  exec.output "d" %d : tensor<4096xf32>
  return
}
