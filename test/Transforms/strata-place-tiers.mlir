// RUN: strata-opt %s --split-input-file --strata-place-tiers="place-params=ssd place-states=host has-ssd=true" | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-place-tiers="place-params=device place-states=device place-activations=host" | FileCheck %s --check-prefix=SWAP
// RUN: strata-opt %s --split-input-file --strata-place-tiers="place-params=device place-states=device place-activations=recompute" | FileCheck %s --check-prefix=RECOMP
// RUN: strata-opt %s --split-input-file --strata-place-tiers="place-params=device place-states=device place-activations=device place-gradients=host" | FileCheck %s --check-prefix=GRAD
// RUN: strata-opt %s --split-input-file --strata-place-tiers="gpu-mem=900 has-ssd=true" | FileCheck %s --check-prefixes=PLAN,%if glpk %{PLAN-GLPK%} %else %{PLAN-NOGLPK%}

// Tests that an off-device parameter is fetched into the arena before each
// read, that an in-place update runs on a fetched copy written back after
// it, and that state follows its own placement.
// CHECK-LABEL: func.func @main
// CHECK: %[[W:.+]] = exec.param "w" trainable {tier = #exec.tier<ssd>
// CHECK: %[[M:.+]] = exec.param "w.m" state {tier = #exec.tier<host>
// CHECK: %[[F1:.+]] = exec.kernel "copy"(%[[W]])
// CHECK-NEXT: %[[Y:.+]] = exec.kernel "matmul"(%{{.+}}, %[[F1]])
// CHECK: %[[F2:.+]] = exec.kernel "copy"(%[[W]])
// CHECK-NEXT: %[[FM:.+]] = exec.kernel "copy"(%[[M]])
// CHECK-NEXT: exec.kernel "update_momentum"(%[[F2]], %{{.+}}, %[[FM]])
// CHECK-DAG: exec.kernel "assign"(%[[W]], %[[F2]])
// CHECK-DAG: exec.kernel "assign"(%[[M]], %[[FM]])

// Tests that a forward activation read by the backward pass is stored after
// its last forward use and fetched back before its first backward use.
// SWAP-LABEL: func.func @main
// SWAP: %[[S:.+]] = exec.swap_space "swap.0" {tier = #exec.tier<host>}
// SWAP: %[[Y:.+]] = exec.kernel "matmul"
// SWAP: exec.kernel "store"(%[[S]], %[[Y]])
// SWAP: %[[B:.+]] = exec.kernel "copy"(%[[S]]) {strata.backward}
// SWAP-NEXT: exec.kernel "exp"(%[[B]]) {strata.backward}
// Tests that an activation whose kernel reads only kept values (an input
// and a device parameter not yet updated) is rerun right before its first
// backward use instead of being kept.
// RECOMP-LABEL: func.func @main
// RECOMP-SAME: exec.recomputed = {recomputed_activations = 1 : i64, recomputed_bytes = 32 : i64}
// Only the backward pass read it, so the forward run is gone.
// RECOMP: %[[X:.+]] = exec.input "x"
// RECOMP: %[[W:.+]] = exec.param "w"
// RECOMP-NOT: exec.kernel "matmul"(%[[X]], %[[W]]) :
// RECOMP: %[[Y2:.+]] = exec.kernel "matmul"(%[[X]], %[[W]]) {strata.backward, strata.recomputed}
// RECOMP-NEXT: exec.kernel "exp"(%[[Y2]]) {strata.backward}
// Tests that under a device budget the planner records its bound over every
// placement (by resource), how many placements it scored and the naive
// plans' predicted steps beside its own.
// PLAN-LABEL: func.func @main
// With GLPK the bound includes the memory relaxation, here the CPU
// backend's (host copies on the compute thread, the SSD's queues).
// PLAN-GLPK-SAME: exec.planner = {planner_bound_compute_us = {{[1-9][0-9]*}} : i64, planner_bound_relaxed_us = {{[1-9][0-9]*}} : i64, planner_bound_ssd_read_us = {{[0-9]+}} : i64, planner_bound_ssd_write_us = {{[0-9]+}} : i64, planner_bound_to_device_us = {{[0-9]+}} : i64, planner_bound_to_host_us = {{[0-9]+}} : i64, planner_bound_updates_us = {{[0-9]+}} : i64, planner_bound_us = {{[1-9][0-9]*}} : i64, planner_distinct = {{[1-9][0-9]*}} : i64, planner_evaluated = {{[1-9][0-9]*}} : i64, planner_greedy_us = {{[0-9]+}} : i64, planner_recompute_all_us = {{[0-9]+}} : i64, planner_relaxed_compute_us = {{[1-9][0-9]*}} : i64, planner_relaxed_cpu_bytes = {{[0-9]+}} : i64, planner_relaxed_cpu_us = {{[0-9]+}} : i64, planner_relaxed_fetched_bytes = {{[0-9]+}} : i64, planner_relaxed_host_only = 1 : i64, planner_relaxed_recomputed_bytes = {{[0-9]+}} : i64, planner_relaxed_ssd_read_us = {{[0-9]+}} : i64, planner_relaxed_ssd_shared_us = {{[0-9]+}} : i64, planner_relaxed_ssd_write_us = {{[0-9]+}} : i64, planner_relaxed_swapped_bytes = {{[0-9]+}} : i64, planner_relaxed_to_device_us = {{[0-9]+}} : i64, planner_relaxed_to_host_us = {{[0-9]+}} : i64, planner_swap_all_us = {{[0-9]+}} : i64}
// PLAN-NOGLPK-SAME: exec.planner = {planner_bound_compute_us = {{[1-9][0-9]*}} : i64, planner_bound_ssd_read_us = {{[0-9]+}} : i64, planner_bound_ssd_write_us = {{[0-9]+}} : i64, planner_bound_to_device_us = {{[0-9]+}} : i64, planner_bound_to_host_us = {{[0-9]+}} : i64, planner_bound_updates_us = {{[0-9]+}} : i64, planner_bound_us = {{[1-9][0-9]*}} : i64, planner_distinct = {{[1-9][0-9]*}} : i64, planner_evaluated = {{[1-9][0-9]*}} : i64, planner_greedy_us = {{[0-9]+}} : i64, planner_recompute_all_us = {{[0-9]+}} : i64, planner_swap_all_us = {{[0-9]+}} : i64}
func.func @main() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %g) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_momentum"(%w, %gw, %m) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "g" %g : tensor<2x4xf32>
  return
}

// -----

// Tests that a gradient the optimizer step reads after the rest of the
// backward pass is stored after its last backward use and fetched before
// each optimizer-step reader: once for `mul(g, g)`, once for the update.
// GRAD-LABEL: func.func @gradients
// GRAD: %[[S:.+]] = exec.swap_space "grad.0" {tier = #exec.tier<host>}
// GRAD: %[[GW:.+]] = exec.kernel "matmul"({{.+}}) {ints = array<i64: 1, 0>, strata.backward}
// GRAD-NEXT: exec.kernel "store"(%[[S]], %[[GW]])
// GRAD-NEXT: exec.kernel "exp"
// GRAD-NEXT: %[[F1:.+]] = exec.kernel "copy"(%[[S]])
// GRAD-NEXT: exec.kernel "mul"(%[[F1]], %[[F1]]) {strata.optimizer}
// GRAD-NEXT: %[[F2:.+]] = exec.kernel "copy"(%[[S]])
// GRAD-NEXT: exec.kernel "update_sgd"(%{{.+}}, %[[F2]])
func.func @gradients() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %y) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gx = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = exec.kernel "mul"(%gw, %gw) {strata.optimizer} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_sgd"(%w, %gw) {floats = array<f64: 0.1>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "gx" %gx : tensor<2x4xf32>
  exec.output "sq" %sq : tensor<4x4xf32>
  return
}

// -----

// Tests that recomputation reruns a chain: %e, read by the backward pass,
// needs %y, which the forward pass alone reads, so both kernels rerun, in
// order, right before the first backward use; the originals of the chain
// stay where the forward pass needs them.
// RECOMP-LABEL: func.func @chain
// RECOMP-SAME: exec.recomputed = {recomputed_activations = 1 : i64, recomputed_bytes = 32 : i64}
// RECOMP: %[[X:.+]] = exec.input "x"
// RECOMP: %[[W:.+]] = exec.param "w"
// RECOMP: %[[Y:.+]] = exec.kernel "matmul"(%[[X]], %[[W]]) :
// RECOMP-NEXT: %[[E:.+]] = exec.kernel "exp"(%[[Y]]) :
// RECOMP-NEXT: exec.kernel "tanh"(%[[E]]) :
// RECOMP-NEXT: %[[Y2:.+]] = exec.kernel "matmul"(%[[X]], %[[W]]) {strata.backward, strata.recomputed}
// RECOMP-NEXT: %[[E2:.+]] = exec.kernel "exp"(%[[Y2]]) {strata.backward, strata.recomputed}
// RECOMP-NEXT: exec.kernel "mul"(%[[E2]], %[[E2]]) {strata.backward}
func.func @chain() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %e = exec.kernel "exp"(%y) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = exec.kernel "tanh"(%e) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "mul"(%e, %e) {strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  exec.output "t" %t : tensor<2x4xf32>
  exec.output "g" %g : tensor<2x4xf32>
  return
}

// -----

// Tests that an activation the backward pass reads through a view, once
// swapped, leaves no view of itself in the backward pass: a view nothing
// reads would still keep it in the arena up to where it sits.
// SWAP-LABEL: func.func @viewed
// SWAP: %[[S:.+]] = exec.swap_space "swap.0" {tier = #exec.tier<host>}
// SWAP: %[[Y:.+]] = exec.kernel "matmul"
// SWAP: exec.kernel "store"(%[[S]], %[[Y]])
// SWAP-NOT: exec.view %[[Y]]
// SWAP: %[[B:.+]] = exec.kernel "copy"(%[[S]]) {strata.backward}
// SWAP-NEXT: %[[V:.+]] = exec.view %[[B]] : tensor<2x4xf32> -> tensor<8xf32>
// SWAP-NEXT: exec.kernel "exp"(%[[V]]) {strata.backward}
func.func @viewed() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = exec.kernel "tanh"(%y) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %u = exec.kernel "tanh"(%t) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %v = exec.view %y : tensor<2x4xf32> -> tensor<8xf32>
  %g = exec.kernel "exp"(%v) {strata.backward} : (tensor<8xf32>) -> tensor<8xf32>
  exec.output "u" %u : tensor<2x4xf32>
  exec.output "g" %g : tensor<8xf32>
  return
}
