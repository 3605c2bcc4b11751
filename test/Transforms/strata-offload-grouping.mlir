// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=1000" --verify-diagnostics | FileCheck %s
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu cpu-job-bytes=1000" --strata-assign-queues | FileCheck %s --check-prefix=QUEUES
// RUN: strata-opt %s --split-input-file --strata-offload-optimizer="place-updates=cpu" | FileCheck %s --check-prefix=PROFILE

// Tests that small updates share a CPU job with the next until the job's
// bytes reach cpu-job-bytes: the two bias updates (48 bytes each) run with
// the weight's (3,072 bytes) where the weight's update stood, after every
// store of the job; the gradients are still stored as soon as they are
// final; the job's two biases land in distinct buffers, and the next
// job's bias in a third, since the first job holds its two until it runs;
// and the next bias starts a new job.
// With the default threshold (4 MB from the default profile: a hand-off at
// most 5% of the job) all four updates are one job.
// CHECK-LABEL: func.func @grouped
// CHECK-SAME: exec.offload = {cpu_jobs = 2 : i64, cpu_updates = 4 : i64, device_updates = 0 : i64, overlapping_backward = 4 : i64, speculative = 0 : i64}
// CHECK-COUNT-3: exec.swap_space "cpu-update.grad.{{[0-9]}}" {tier = #exec.tier<host>} : tensor<4xf32>
// CHECK-NOT: exec.swap_space "cpu-update.grad.{{[0-9]}}" {tier = #exec.tier<host>} : tensor<4xf32>
// CHECK: exec.input "x"
// CHECK-DAG: %[[W:.+]] = exec.param "w" trainable
// CHECK-DAG: %[[B1:.+]] = exec.param "b1" trainable
// CHECK-DAG: %[[B2:.+]] = exec.param "b2" trainable
// CHECK-DAG: %[[B3:.+]] = exec.param "b3" trainable
// CHECK: %[[G1:.+]] = exec.kernel "exp"(%{{.+}}) {strata.backward} : (tensor<4xf32>)
// CHECK-NEXT: exec.kernel "store"(%[[L1:.+]], %[[G1]])
// CHECK-NEXT: %[[G2:.+]] = exec.kernel "tanh"(%[[G1]]) {strata.backward}
// CHECK-NEXT: exec.kernel "store"(%[[L2:.+]], %[[G2]])
// CHECK-NEXT: %[[GW:.+]] = exec.kernel "matmul"
// CHECK-NEXT: exec.kernel "store"(%[[LW:.+]], %[[GW]])
// CHECK-NEXT: exec.kernel "update_sgd"(%[[B1]], %[[L1]])
// CHECK-NEXT: exec.kernel "update_sgd"(%[[B2]], %[[L2]])
// CHECK-NEXT: exec.kernel "update_sgd"(%[[W]], %[[LW]])
// CHECK-NEXT: %[[G3:.+]] = exec.kernel "sqrt"(%[[G1]]) {strata.backward}
// CHECK-NEXT: exec.kernel "store"(%[[L3:.+]], %[[G3]])
// CHECK-NEXT: exec.kernel "update_sgd"(%[[B3]], %[[L3]])
// CHECK-NEXT: exec.kernel "exp"(%[[G3]]) {strata.backward}
// CHECK-NOT: "assign"
// QUEUES-LABEL: func.func @grouped
// QUEUES: exec.kernel "update_sgd"({{.+}}) {floats = {{.+}}, queue = #exec.queue<cpu>, waits
// QUEUES-NEXT: exec.kernel "update_sgd"({{.+}}) {floats = {{.+}}, queue = #exec.queue<cpu>
// QUEUES-NEXT: exec.kernel "update_sgd"({{.+}}) {floats = {{.+}}, queue = #exec.queue<cpu>
// PROFILE-LABEL: func.func @grouped
// PROFILE-SAME: cpu_jobs = 1 : i64, cpu_updates = 4 : i64
func.func @grouped() {
  %x = exec.input "x" : tensor<4xf32>
  %xm = exec.input "xm" : tensor<16x16xf32>
  %w = exec.param "w" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<16x16xf32>} : tensor<16x16xf32>
  %b1 = exec.param "b1" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %b2 = exec.param "b2" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %b3 = exec.param "b3" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %g1 = exec.kernel "exp"(%x) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %f1 = exec.kernel "copy"(%b1) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @below {{4 of 4 updates run on the CPU; 4 overlap the backward pass; small ones grouped with the next: 2 CPU jobs}}
  exec.kernel "update_sgd"(%f1, %g1) {floats = array<f64: 0.1, 0.0>} : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%b1, %f1) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %g2 = exec.kernel "tanh"(%g1) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %f2 = exec.kernel "copy"(%b2) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_sgd"(%f2, %g2) {floats = array<f64: 0.1, 0.0>} : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%b2, %f2) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %gw = exec.kernel "matmul"(%xm, %xm) {strata.backward} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %fw = exec.kernel "copy"(%w) : (tensor<16x16xf32>) -> tensor<16x16xf32>
  exec.kernel "update_sgd"(%fw, %gw) {floats = array<f64: 0.1, 0.0>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
  exec.kernel "assign"(%w, %fw) : (tensor<16x16xf32>, tensor<16x16xf32>) -> ()
  %g3 = exec.kernel "sqrt"(%g1) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %f3 = exec.kernel "copy"(%b3) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_sgd"(%f3, %g3) {floats = array<f64: 0.1, 0.0>} : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%b3, %f3) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %gx = exec.kernel "exp"(%g3) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  exec.output "gx" %gx : tensor<4xf32>
  return
}

// -----

// Tests that an update does not join the job before it when something in
// between touches that job's tensors (here a fetch of the first parameter
// for a later reader): deferring the first update past it would change
// what the reader sees.
// CHECK-LABEL: func.func @touched
// CHECK-SAME: cpu_jobs = 2 : i64
// CHECK: exec.kernel "update_sgd"(%[[A:.+]], %{{.+}})
// CHECK-NEXT: exec.kernel "copy"(%[[A]])
// CHECK: exec.kernel "update_sgd"
func.func @touched() {
  %x = exec.input "x" : tensor<4xf32>
  %a = exec.param "a" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %b = exec.param "b" trainable {tier = #exec.tier<host>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  %g = exec.kernel "exp"(%x) {strata.backward} : (tensor<4xf32>) -> tensor<4xf32>
  %fa = exec.kernel "copy"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark @below {{2 of 2 updates run on the CPU; 0 overlap the backward pass; 2 after it}}
  exec.kernel "update_sgd"(%fa, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%a, %fa) : (tensor<4xf32>, tensor<4xf32>) -> ()
  %ra = exec.kernel "copy"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %fb = exec.kernel "copy"(%b) : (tensor<4xf32>) -> tensor<4xf32>
  exec.kernel "update_sgd"(%fb, %g) {floats = array<f64: 0.1, 0.0>} : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.kernel "assign"(%b, %fb) : (tensor<4xf32>, tensor<4xf32>) -> ()
  exec.output "ra" %ra : tensor<4xf32>
  return
}
