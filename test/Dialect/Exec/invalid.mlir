// RUN: strata-opt %s --split-input-file --verify-diagnostics

// Tests that a kernel must be one the runtime knows.
func.func @unknown_kernel(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown kernel 'frobnicate'}}
  %0 = exec.kernel "frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
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
  // expected-error @+1 {{attribute 'tier' failed to satisfy constraint: string attribute whose value is device, host or ssd}}
  %0 = exec.param "w" {tier = "nvme", value = dense<1.0> : tensor<4xf32>} : tensor<4xf32>
  return
}

// -----

// Tests that a swap space's tier is checked too.
func.func @unknown_swap_tier() {
  // expected-error @+1 {{attribute 'tier' failed to satisfy constraint: string attribute whose value is device, host or ssd}}
  %0 = exec.swap_space "swap.0" {tier = "disk"} : tensor<4xf32>
  return
}
