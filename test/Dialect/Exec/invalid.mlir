// RUN: strata-opt %s --split-input-file --verify-diagnostics

// Tests that a kernel must be one the runtime knows.
func.func @unknown_kernel(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown kernel 'frobnicate'}}
  %0 = exec.kernel "frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that a kernel takes the operands the kernel table says (the plan
// loader's check, here with a location): a matrix product two.
func.func @matmul_one_operand(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{'matmul' takes 2 to 3 operands, not 1}}
  %0 = exec.kernel "matmul"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// Tests a range of operand counts: an AdamW update takes 4 to 6.
func.func @adamw_three_operands(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{'update_adamw' takes 4 to 10 operands, not 3}}
  exec.kernel "update_adamw"(%w, %g, %m) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> ()
  return
}

// -----

// Tests a variadic kernel: concat takes at least one.
func.func @concat_nothing() {
  // expected-error @+1 {{'concat' takes at least 1 operand, not 0}}
  %0 = exec.kernel "concat"() : () -> tensor<4xf32>
  return
}

// -----

// Tests the results: an update writes in place and has none; layer-norm's
// gradient has three.
func.func @update_with_a_result(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'update_sgd' has 0 results, not 1}}
  %0 = exec.kernel "update_sgd"(%w, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// Tests that a view keeps the element type and count.
func.func @bad_view(%x: tensor<4xf32>) {
  // expected-error @+1 {{must keep the element type and count}}
  %0 = exec.view %x : tensor<4xf32> -> tensor<5xf32>
  return
}

// -----

// Tests that a stored value has the parameter's type.
func.func @bad_param() {
  // expected-error @+1 {{value type 'tensor<2xf32>' does not match result type 'tensor<4xf32>'}}
  %0 = exec.param "w" {value = dense<1.0> : tensor<2xf32>} : tensor<4xf32>
  return
}

// -----

// Tests that a parameter's tier is one the runtime has (an unknown name
// used to mean the device).
func.func @unknown_param_tier() {
  // expected-error @+2 {{expected ::strata::exec::Tier to be one of: device, host, ssd}}
  // expected-error @+1 {{failed to parse Exec_TierAttr parameter 'value'}}
  %0 = exec.param "w" {tier = #exec.tier<nvme>, value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  return
}

// -----

// Tests that a swap space's tier is typed: a string is refused.
func.func @string_swap_tier() {
  // expected-error @+1 {{attribute 'tier' failed to satisfy constraint: where a stored tensor lives}}
  %0 = exec.swap_space "swap.0" {tier = "host"} : tensor<4xf32>
  return
}

// -----

// Tests that a kernel's queue is one the runtime has.
func.func @unknown_queue(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::strata::exec::Queue to be one of: compute, h2d, d2h, ssd_read, ssd_write, cpu}}
  // expected-error @+1 {{failed to parse Exec_QueueAttr parameter 'value'}}
  %0 = exec.kernel "exp"(%x) {queue = #exec.queue<gpu>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}
