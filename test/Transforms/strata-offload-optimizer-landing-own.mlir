// RUN: strata-opt %s --strata-offload-optimizer="place-updates=auto cpu-job-bytes=0 cpu-mem=409600 profile=%S/Inputs/profile.txt" | FileCheck %s
// RUN: strata-opt %s --strata-offload-optimizer="place-updates=auto cpu-job-bytes=0 cpu-mem=405504 profile=%S/Inputs/profile.txt" | FileCheck %s --check-prefix=UNIFORM

// Tests that what the uniform landing pools leave of the host budget goes
// to the types whose every update can have a buffer of its own, cheapest
// first. Four updates of a one-page type (4xf32) and four of an eight-page
// type (4x2048xf32), each its own CPU job, parameters and states on the
// host (72 pages). Three buffers a type take 27 pages, four 36; with 100
// pages the pools stay at three, and the one page left gives the small
// type a fourth buffer: one per update, so none of its stores waits for a
// CPU job. With 99 pages both types keep three.
// CHECK-LABEL: func.func @small_types_own
// CHECK-SAME: cpu_updates = 8 : i64
// CHECK-COUNT-4: exec.swap_space "cpu-update.grad.{{[0-9]+}}" {tier = #exec.tier<host>} : tensor<4xf32>
// CHECK-NOT: exec.swap_space "cpu-update.grad.{{[0-9]+}}" {tier = #exec.tier<host>} : tensor<4xf32>
// UNIFORM-LABEL: func.func @small_types_own
// UNIFORM-SAME: cpu_updates = 8 : i64
// UNIFORM-COUNT-3: exec.swap_space "cpu-update.grad.{{[0-9]+}}" {tier = #exec.tier<host>} : tensor<4xf32>
// UNIFORM-NOT: exec.swap_space "cpu-update.grad.{{[0-9]+}}" {tier = #exec.tier<host>} : tensor<4xf32>
func.func @small_types_own() {
  %xs = exec.input "xs" : tensor<4xf32>
  %xb = exec.input "xb" : tensor<4x2048xf32>
  %s0 = exec.param "s0" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %s0m = exec.param "s0.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4xf32>} : tensor<4xf32>
  %b0 = exec.param "b0" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %b0m = exec.param "b0.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %s1 = exec.param "s1" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %s1m = exec.param "s1.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4xf32>} : tensor<4xf32>
  %b1 = exec.param "b1" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %b1m = exec.param "b1.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %s2 = exec.param "s2" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %s2m = exec.param "s2.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4xf32>} : tensor<4xf32>
  %b2 = exec.param "b2" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %b2m = exec.param "b2.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %s3 = exec.param "s3" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %s3m = exec.param "s3.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4xf32>} : tensor<4xf32>
  %b3 = exec.param "b3" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %b3m = exec.param "b3.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x2048xf32>} : tensor<4x2048xf32>
  %s0u = exec.kernel "copy"(%s0) : (tensor<4xf32>) -> tensor<4xf32>
  %s0y = exec.kernel "add"(%xs, %s0u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b0u = exec.kernel "copy"(%b0) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b0y = exec.kernel "add"(%xb, %b0u) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %s1u = exec.kernel "copy"(%s1) : (tensor<4xf32>) -> tensor<4xf32>
  %s1y = exec.kernel "add"(%xs, %s1u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b1u = exec.kernel "copy"(%b1) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b1y = exec.kernel "add"(%xb, %b1u) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %s2u = exec.kernel "copy"(%s2) : (tensor<4xf32>) -> tensor<4xf32>
  %s2y = exec.kernel "add"(%xs, %s2u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b2u = exec.kernel "copy"(%b2) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b2y = exec.kernel "add"(%xb, %b2u) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %s3u = exec.kernel "copy"(%s3) : (tensor<4xf32>) -> tensor<4xf32>
  %s3y = exec.kernel "add"(%xs, %s3u) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b3u = exec.kernel "copy"(%b3) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b3y = exec.kernel "add"(%xb, %b3u) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b3g = exec.kernel "exp"(%b3y) {strata.backward} : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b3f = exec.kernel "copy"(%b3) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b3fm = exec.kernel "copy"(%b3m) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  exec.kernel "update_momentum"(%b3f, %b3g, %b3fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x2048xf32>, tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b3, %b3f) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b3m, %b3fm) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  %s3g = exec.kernel "exp"(%s3y) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %s3f = exec.kernel "copy"(%s3) : (tensor<4xf32>) -> tensor<4xf32>
  %s3fm = exec.kernel "copy"(%s3m) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_momentum"(%s3f, %s3g, %s3fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s3, %s3f) : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s3m, %s3fm) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %b2g = exec.kernel "exp"(%b2y) {strata.backward} : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b2f = exec.kernel "copy"(%b2) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b2fm = exec.kernel "copy"(%b2m) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  exec.kernel "update_momentum"(%b2f, %b2g, %b2fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x2048xf32>, tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b2, %b2f) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b2m, %b2fm) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  %s2g = exec.kernel "exp"(%s2y) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %s2f = exec.kernel "copy"(%s2) : (tensor<4xf32>) -> tensor<4xf32>
  %s2fm = exec.kernel "copy"(%s2m) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_momentum"(%s2f, %s2g, %s2fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s2, %s2f) : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s2m, %s2fm) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %b1g = exec.kernel "exp"(%b1y) {strata.backward} : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b1f = exec.kernel "copy"(%b1) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b1fm = exec.kernel "copy"(%b1m) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  exec.kernel "update_momentum"(%b1f, %b1g, %b1fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x2048xf32>, tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b1, %b1f) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b1m, %b1fm) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  %s1g = exec.kernel "exp"(%s1y) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %s1f = exec.kernel "copy"(%s1) : (tensor<4xf32>) -> tensor<4xf32>
  %s1fm = exec.kernel "copy"(%s1m) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_momentum"(%s1f, %s1g, %s1fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s1, %s1f) : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s1m, %s1fm) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %b0g = exec.kernel "exp"(%b0y) {strata.backward} : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b0f = exec.kernel "copy"(%b0) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  %b0fm = exec.kernel "copy"(%b0m) : (tensor<4x2048xf32>) -> tensor<4x2048xf32>
  exec.kernel "update_momentum"(%b0f, %b0g, %b0fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x2048xf32>, tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b0, %b0f) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  exec.kernel "assign"(%b0m, %b0fm) : (tensor<4x2048xf32>, tensor<4x2048xf32>) -> ()
  %s0g = exec.kernel "exp"(%s0y) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %s0f = exec.kernel "copy"(%s0) : (tensor<4xf32>) -> tensor<4xf32>
  %s0fm = exec.kernel "copy"(%s0m) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_momentum"(%s0f, %s0g, %s0fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s0, %s0f) : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%s0m, %s0fm) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %gx = exec.kernel "exp"(%xs) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  exec.output "gx" %gx : tensor<4xf32>
  return
}
