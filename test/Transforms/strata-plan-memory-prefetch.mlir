// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=0" | FileCheck %s
// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=0 prefetch-window=0" | FileCheck %s --check-prefix=NONE
// RUN: strata-opt %s --strata-plan-memory="prefetch-lead=0 gpu-mem=2100" | FileCheck %s --check-prefix=BUDGET

// Tests that a fetch's destination is reserved ahead of the fetch, so it
// cannot share bytes with the buffers computed meanwhile; and that under a
// device budget the window shrinks until the arena fits.
// Without a window the arena is %x + %a (2048 bytes) and %wf reuses %x's
// bytes; reserved from the start, %wf sits above them: 2304 bytes.
// CHECK-LABEL: func.func @main()
// CHECK-SAME: exec.arena_bytes = 2304 : i64
// CHECK-SAME: exec.prefetch_window = 32 : i64
// CHECK: exec.kernel "copy"(%{{.+}}) {offset = 2048 : i64}

// NONE-LABEL: func.func @main()
// NONE-SAME: exec.arena_bytes = 2048 : i64
// NONE-SAME: exec.prefetch_window = 0 : i64
// NONE: exec.kernel "copy"(%{{.+}}) {offset = 0 : i64}

// With 2100 bytes, windows 32 down to 4 need 2304; 2 (from op 3, where %x
// is dead) fits in 2048.
// BUDGET-LABEL: func.func @main()
// BUDGET-SAME: exec.arena_bytes = 2048 : i64
// BUDGET-SAME: exec.prefetch_window = 2 : i64
func.func @main() {
  %w = exec.param "w" {tier = #exec.tier<host>, value = dense<1.0> : tensor<64xf32>} : tensor<64xf32>
  %x = exec.input "x" : tensor<256xf32>
  %a = exec.kernel "exp"(%x) : (tensor<256xf32>) -> tensor<256xf32>
  %b = exec.kernel "slice"(%a) : (tensor<256xf32>) -> tensor<16xf32>
  %c = exec.kernel "exp"(%b) : (tensor<16xf32>) -> tensor<16xf32>
  %wf = exec.kernel "copy"(%w) : (tensor<64xf32>) -> tensor<64xf32>
  %z = exec.kernel "exp"(%wf) : (tensor<64xf32>) -> tensor<64xf32>
  exec.output "c" %c : tensor<16xf32>
  exec.output "z" %z : tensor<64xf32>
  return
}
