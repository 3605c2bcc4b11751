// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=0" --verify-diagnostics | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=0" --strata-assign-queues --verify-diagnostics | FileCheck %s --check-prefix=QUEUES
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=device" | FileCheck %s --check-prefix=DEVICE
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=0 speculate-updates=false" | FileCheck %s --check-prefix=WAIT

// Tests that the update of a host-resident parameter and state, which
// PlaceTiers left as fetches, a device update and write-backs, becomes a
// store of the gradient to host memory and the update on the host tensors
// themselves, with no fetch or write-back left; that it overlaps the
// backward kernel after it; and that it goes to the CPU queue, waiting for
// the gradient's store, while the fetch of the parameter for the forward
// pass comes before it.
// CHECK-LABEL: func.func @host_update
// CHECK-SAME: exec.offload = {cpu_jobs = 1 : i64, cpu_updates = 1 : i64, device_updates = 0 : i64, overlapping_backward = 1 : i64, speculative = 0 : i64}
// CHECK-DAG: %[[GS:.+]] = exec.swap_space "cpu-update.grad.0" {tier = #exec.tier<host>}
// CHECK-DAG: %[[W:.+]] = exec.param "w" trainable
// CHECK-DAG: %[[M:.+]] = exec.param "w.m" state
// CHECK: %[[GW:.+]] = exec.kernel "matmul"(%{{.+}}, %{{.+}}) {ints = array<i64: 1, 0>, strata.backward}
// CHECK-NEXT: exec.kernel "store"(%[[GS]], %[[GW]])
// CHECK-NEXT: exec.kernel "update_momentum"(%[[W]], %[[GS]], %[[M]]) {floats = array<f64: 1.000000e-01, 9.000000e-01, 0.000000e+00>}
// CHECK-NEXT: exec.kernel "exp"
// CHECK-NOT: "assign"
// QUEUES-LABEL: func.func @host_update
// QUEUES: exec.kernel "copy"({{.+}}) {queue = #exec.queue<h2d>}
// QUEUES: exec.kernel "store"({{.+}}) {queue = #exec.queue<d2h>
// QUEUES-NEXT: exec.kernel "update_momentum"({{.+}}) {floats = {{.+}}, queue = #exec.queue<cpu>, waits = array<i64: {{.+}}>}
// DEVICE-LABEL: func.func @host_update
// DEVICE: exec.kernel "update_momentum"(%{{.+}}, %{{.+}}, %{{.+}}) {floats
// DEVICE: exec.kernel "assign"
func.func @host_update() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %f1 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %f1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %g) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %f2 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm = exec.kernel "copy"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{1 of 1 updates run on the CPU; 1 overlap the backward pass}}
  exec.kernel "update_momentum"(%f2, %gw, %fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%w, %f2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m, %fm) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %gx = exec.kernel "exp"(%g) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  exec.output "gx" %gx : tensor<2x4xf32>
  return
}

// -----

// Tests that an update whose scale is computed after the backward pass
// (from every gradient: exact clipping) moves but is reported as unable to
// overlap, and that its scale is stored to host memory once.
// CHECK-LABEL: func.func @late_scale
// CHECK-DAG: %[[SS:.+]] = exec.swap_space "cpu-update.scale" {tier = #exec.tier<host>}
// CHECK: exec.kernel "store"(%[[SS]], %{{.+}}) : (tensor<f32>, tensor<f32>)
// CHECK-NEXT: exec.kernel "update_sgd"(%{{.+}}, %{{.+}}, %[[SS]])
func.func @late_scale() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %f1 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %f1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %y) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %sq = exec.kernel "mul"(%gw, %gw) {strata.optimizer} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = exec.kernel "reduce_sum"(%sq) {ints = array<i64: 0, 1, 0>, strata.optimizer} : (tensor<4x4xf32>) -> tensor<f32>
  %f2 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{1 of 1 updates run on the CPU; 0 overlap the backward pass; 1 start only after it: their scale depends on every gradient}}
  exec.kernel "update_sgd"(%f2, %gw, %n) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> ()
  exec.kernel "assign"(%w, %f2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  return
}

// -----

// Tests that an update whose scale needs every gradient (exact clipping),
// with backward kernels after its gradient, speculates: its gradient is
// stored as soon as it is final, into a buffer of its own, and the update
// runs right after that with no scale (ints[2] = 1), keeping the old
// parameter and state in host keeps; where it stood, the redo (ints[2] =
// 2) takes the scale and the same keeps. Without speculation it waits.
// CHECK-LABEL: func.func @speculate
// CHECK-SAME: speculative = 1 : i64
// CHECK-DAG: %[[KW:.+]] = exec.swap_space "speculation.keep.0" {tier = #exec.tier<host>} : tensor<4x4xf32>
// CHECK-DAG: %[[KM:.+]] = exec.swap_space "speculation.keep.1" {tier = #exec.tier<host>} : tensor<4x4xf32>
// CHECK-DAG: %[[GS:.+]] = exec.swap_space "cpu-update.grad.0" {tier = #exec.tier<host>}
// CHECK-DAG: %[[W:.+]] = exec.param "w" trainable
// CHECK-DAG: %[[M:.+]] = exec.param "w.m" state
// CHECK: %[[GW:.+]] = exec.kernel "matmul"(%{{.+}}, %{{.+}}) {ints = array<i64: 1, 0>, strata.backward}
// CHECK-NEXT: exec.kernel "store"(%[[GS]], %[[GW]])
// CHECK-NEXT: exec.kernel "update_momentum"(%[[W]], %[[GS]], %[[M]], %[[KW]], %[[KM]]) {floats = {{.+}}, ints = array<i64: 1, 0, 1>}
// CHECK-NEXT: exec.kernel "exp"
// CHECK: exec.kernel "reduce_sum"
// CHECK: exec.kernel "update_momentum"(%[[W]], %[[GS]], %[[M]], %{{.+}}, %[[KW]], %[[KM]]) {floats = {{.+}}, ints = array<i64: 1, 0, 2>}
// WAIT-LABEL: func.func @speculate
// WAIT-SAME: speculative = 0 : i64
// WAIT-NOT: speculation.keep
// WAIT: exec.kernel "reduce_sum"
// WAIT: exec.kernel "store"
// WAIT: exec.kernel "update_momentum"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) {floats
func.func @speculate() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %f1 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %f1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %g = exec.kernel "exp"(%y) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %g) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gx = exec.kernel "exp"(%g) {strata.backward} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %sq = exec.kernel "mul"(%gw, %gw) {strata.optimizer} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = exec.kernel "reduce_sum"(%sq) {ints = array<i64: 0, 1, 0>, strata.optimizer} : (tensor<4x4xf32>) -> tensor<f32>
  %f2 = exec.kernel "copy"(%w) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fm = exec.kernel "copy"(%m) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{1 of 1 updates run on the CPU; 1 overlap the backward pass (1 speculatively}}
  exec.kernel "update_momentum"(%f2, %gw, %fm, %n) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>) -> ()
  exec.kernel "assign"(%w, %f2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%m, %fm) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.output "gx" %gx : tensor<2x4xf32>
  return
}

// -----

// Tests that an update whose parameter stays in device memory, or whose
// gradient accumulator does, stays on the device, and says why.
// CHECK-LABEL: func.func @stays
// CHECK-SAME: exec.offload = {cpu_jobs = 0 : i64, cpu_updates = 0 : i64, device_updates = 2 : i64, overlapping_backward = 0 : i64, speculative = 0 : i64}
// CHECK-NOT: exec.swap_space
func.func @stays() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %v = exec.param "v" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %acc = exec.param "v.acc" state {tier = #exec.tier<device>, value = dense<0.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %y) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{1 update stay on the device: its parameter lives in device memory}}
  exec.kernel "update_sgd"(%w, %gw) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %fv = exec.kernel "copy"(%v) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{1 update stay on the device: its gradient accumulator lives in device memory}}
  exec.kernel "update_sgd"(%fv, %acc) {ints = array<i64: 2>, floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%v, %fv) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  return
}

// -----

// Tests that gradients of one type land in three host buffers taken in
// turn: the fourth update's gradient reuses the first buffer, and its store
// waits for the CPU update that read that buffer (step 2).
// CHECK-LABEL: func.func @landing_reuse
// CHECK-COUNT-3: exec.swap_space "cpu-update.grad.{{[0-2]}}"
// CHECK-NOT: exec.swap_space
// QUEUES-LABEL: func.func @landing_reuse
// QUEUES: exec.kernel "store"(%[[L0:.+]], %{{.+}}) {queue = #exec.queue<d2h>
// QUEUES: exec.kernel "store"(%[[L0]], %{{.+}}) {queue = #exec.queue<d2h>, waits = array<i64: {{.*}}2{{.*}}>}
func.func @landing_reuse() {
  %x = exec.input "x" : tensor<4x4xf32>
  %a = exec.param "a" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %b = exec.param "b" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %c = exec.param "c" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %d = exec.param "d" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %g = exec.kernel "exp"(%x) {strata.backward} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %fa = exec.kernel "copy"(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{4 of 4 updates run on the CPU; 0 overlap the backward pass; 4 after it}}
  exec.kernel "update_sgd"(%fa, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%a, %fa) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %fb = exec.kernel "copy"(%b) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_sgd"(%fb, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%b, %fb) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %fc = exec.kernel "copy"(%c) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_sgd"(%fc, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%c, %fc) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  %fd = exec.kernel "copy"(%d) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  exec.kernel "update_sgd"(%fd, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  exec.kernel "assign"(%d, %fd) : (tensor<4x4xf32>, tensor<4x4xf32>) -> ()
  return
}

// -----

// Tests that a sharded update (--shard-optimizer) of a device parameter
// whose state lives in host memory moves to the CPU: this rank's shard of
// the parameter goes to a host buffer of its own beside the gradient's, the
// CPU updates it there, and the all-gather, moved after the CPU job, reads
// it fetched back.
// CHECK-LABEL: func.func @sharded_update
// CHECK-DAG: %[[WH:.+]] = exec.swap_space "cpu-update.shard.0" {tier = #exec.tier<host>} : tensor<8xf32>
// CHECK-DAG: %[[GS:.+]] = exec.swap_space "cpu-update.grad.0" {tier = #exec.tier<host>} : tensor<8xf32>
// CHECK-DAG: %[[W:.+]] = exec.param "w" trainable
// CHECK-DAG: %[[M:.+]] = exec.param "w.m" state
// CHECK: %[[WS:.+]] = exec.kernel "shard"(%[[W]]) {ints = array<i64: 2>}
// CHECK-NEXT: exec.kernel "store"(%[[WH]], %[[WS]])
// CHECK-NEXT: exec.kernel "store"(%[[GS]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%[[WH]], %[[GS]], %[[M]])
// CHECK-NEXT: %[[BACK:.+]] = exec.kernel "copy"(%[[WH]])
// CHECK-NEXT: exec.kernel "all_gather"(%[[W]], %[[BACK]]) {ints = array<i64: 2>}
// CHECK-NOT: "assign"
// DEVICE-LABEL: func.func @sharded_update
// DEVICE: exec.kernel "update_momentum"(%[[WS:.+]], %{{.+}}, %{{.+}}) {floats
// DEVICE: exec.kernel "all_gather"(%{{.+}}, %[[WS]])
func.func @sharded_update() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %m = exec.param "w.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<8xf32>} : tensor<8xf32>
  %y = exec.kernel "matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %y) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gs = exec.kernel "reduce_scatter"(%gw) {ints = array<i64: 2>, strata.backward} : (tensor<4x4xf32>) -> tensor<8xf32>
  %ws = exec.kernel "shard"(%w) {ints = array<i64: 2>} : (tensor<4x4xf32>) -> tensor<8xf32>
  %fm = exec.kernel "copy"(%m) : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @below {{1 of 1 updates run on the CPU; 0 overlap the backward pass}}
  exec.kernel "update_momentum"(%ws, %gs, %fm) {floats = array<f64: 0.1, 0.9, 0.0>} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> ()
  exec.kernel "assign"(%m, %fm) : (tensor<8xf32>, tensor<8xf32>) -> ()
  exec.kernel "all_gather"(%w, %ws) {ints = array<i64: 2>} : (tensor<4x4xf32>, tensor<8xf32>) -> ()
  return
}

// -----

// Tests that the update of a sharded parameter (--shard-parameters) stored
// on the device, with its state in host memory, moves to the CPU: the
// stored shard and its bf16 copy's shard go to host buffers of their own
// beside the gradient's, the CPU updates them there, and each is fetched
// back and assigned to its stored shard after the CPU job.
// CHECK-LABEL: func.func @sharded_parameter_update
// CHECK-DAG: %[[WH:.+]] = exec.swap_space "cpu-update.shard.0" {tier = #exec.tier<host>} : tensor<8xf32>
// CHECK-DAG: %[[LH:.+]] = exec.swap_space "cpu-update.shard.1" {tier = #exec.tier<host>} : tensor<8xbf16>
// CHECK-DAG: %[[GS:.+]] = exec.swap_space "cpu-update.grad.0" {tier = #exec.tier<host>} : tensor<8xf32>
// CHECK-DAG: %[[W:.+]] = exec.param "w" trainable {{.*}}shard_ranks = 2
// CHECK-DAG: %[[L:.+]] = exec.param "w.bf16" {{.*}}shard_ranks = 2
// CHECK-DAG: %[[M:.+]] = exec.param "w.m" state
// CHECK: exec.kernel "store"(%[[WH]], %[[W]])
// CHECK-NEXT: exec.kernel "store"(%[[LH]], %[[L]])
// CHECK-NEXT: exec.kernel "store"(%[[GS]], %{{.+}})
// CHECK-NEXT: exec.kernel "update_momentum"(%[[WH]], %[[GS]], %[[M]], %[[LH]])
// CHECK-NEXT: %[[WB:.+]] = exec.kernel "copy"(%[[WH]])
// CHECK-NEXT: exec.kernel "assign"(%[[W]], %[[WB]])
// CHECK-NEXT: %[[LB:.+]] = exec.kernel "copy"(%[[LH]])
// CHECK-NEXT: exec.kernel "assign"(%[[L]], %[[LB]])
// CHECK-NEXT: return
// DEVICE-LABEL: func.func @sharded_parameter_update
// DEVICE: %[[W:.+]] = exec.param "w" trainable
// DEVICE: exec.kernel "update_momentum"(%[[W]], %{{.+}}, %{{.+}}, %{{.+}}) {floats
func.func @sharded_parameter_update() {
  %x = exec.input "x" : tensor<2x4xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<4x4xf32>, shard_ranks = 2 : i64} : tensor<8xf32>
  %l = exec.param "w.bf16" {value = dense<1.0> : tensor<4x4xbf16>, copy_of = "w", shard_ranks = 2 : i64} : tensor<8xbf16>
  %m = exec.param "w.m" state {tier = #exec.tier<host>, value = dense<0.0> : tensor<8xf32>} : tensor<8xf32>
  %ww = exec.kernel "unshard"(%l) {ints = array<i64: 2>} : (tensor<8xbf16>) -> tensor<4x4xbf16>
  %y = exec.kernel "matmul"(%x, %ww) : (tensor<2x4xf32>, tensor<4x4xbf16>) -> tensor<2x4xf32>
  %gw = exec.kernel "matmul"(%x, %y) {ints = array<i64: 1, 0>, strata.backward} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %gs = exec.kernel "reduce_scatter"(%gw) {ints = array<i64: 2>, strata.backward} : (tensor<4x4xf32>) -> tensor<8xf32>
  %fm = exec.kernel "copy"(%m) : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @below {{1 of 1 updates run on the CPU; 0 overlap the backward pass}}
  exec.kernel "update_momentum"(%w, %gs, %fm, %l) {floats = array<f64: 0.1, 0.9, 0.0>, ints = array<i64: 1, 1>} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>) -> ()
  exec.kernel "assign"(%m, %fm) : (tensor<8xf32>, tensor<8xf32>) -> ()
  return
}
