// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=0 prefetch-window=0" | FileCheck %s --check-prefix=NONE
// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=1 profile=%S/Inputs/profile-gpu.txt" | FileCheck %s

// Tests the timed windows (prefetch-lead): under profile-gpu.txt the fetch
// of %w (16 KiB over a 2 GB/s host link, 8.2 us) must start 8.2 us before
// its use, inside %a (an exp of 4096 elements, 42 us), so its destination
// is reserved from %a on, while %x is live, and cannot take %x's bytes;
// and the write-back of %u (16 KiB at 1 GB/s, 16.4 us) keeps %u's bytes
// through the next kernel, which starts before the write-back ends, so
// %c does not take them (%d, 42 us later, does).

// Without windows the fetch reuses %x's bytes (dead after %a).
// NONE-LABEL: func.func @main()
// NONE: exec.input "x" {offset = 0 : i64}
// NONE: exec.kernel "copy"(%{{.+}}) {offset = 0 : i64}

// CHECK-LABEL: func.func @main()
// CHECK-SAME: exec.prefetch_lead = 1.0
// CHECK: exec.input "x" {offset = 0 : i64}
// CHECK: exec.kernel "exp"(%{{.+}}) {offset = 16384 : i64}
// CHECK: exec.kernel "copy"(%{{.+}}) {offset = 32768 : i64}
// CHECK: %[[U:.+]] = exec.kernel "exp"(%{{.+}}) {offset = 0 : i64}
// CHECK: exec.kernel "assign"(%{{.+}}, %[[U]])
// CHECK-NEXT: exec.kernel "exp"(%{{.+}}) {offset = 32768 : i64}
// CHECK-NEXT: exec.kernel "exp"(%{{.+}}) {offset = 0 : i64}
func.func @main() {
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4096xf32>} : tensor<4096xf32>
  %x = exec.input "x" : tensor<4096xf32>
  %a = exec.kernel "exp"(%x) : (tensor<4096xf32>) -> tensor<4096xf32>
  %wf = exec.kernel "copy"(%w) : (tensor<4096xf32>) -> tensor<4096xf32>
  %u = exec.kernel "exp"(%wf) : (tensor<4096xf32>) -> tensor<4096xf32>
  exec.kernel "assign"(%w, %u) : (tensor<4096xf32>, tensor<4096xf32>) -> ()
  %c = exec.kernel "exp"(%a) : (tensor<4096xf32>) -> tensor<4096xf32>
  %d = exec.kernel "exp"(%c) : (tensor<4096xf32>) -> tensor<4096xf32>
  exec.output "d" %d : tensor<4096xf32>
  return
}
