// RUN: strata-opt %s --verify-diagnostics --strata-low-copies

// The error of --strata-low-copies: a master whose values it cannot read
// to make the low-precision copy (a resource the file does not hold).
func.func @unreadable() {
  %x = exec.input "x" : tensor<3x1xbf16>
  %s = exec.input "s" : tensor<f32>
  // expected-error @below {{cannot read the values of 'w' to make its bf16 copy}}
  %w = exec.param "w" trainable {value = dense_resource<absent> : tensor<1x2xf32>} : tensor<1x2xf32>
  %c = exec.kernel "cast"(%w) : (tensor<1x2xf32>) -> tensor<1x2xbf16>
  %y = exec.kernel "matmul"(%x, %c) {ints = array<i64: 0, 0>} : (tensor<3x1xbf16>, tensor<1x2xbf16>) -> tensor<3x2xbf16>
  %g = exec.kernel "exp"(%w) {strata.backward} : (tensor<1x2xf32>) -> tensor<1x2xf32>
  exec.kernel "update_sgd"(%w, %g, %s) {floats = array<f64: 0.1, 0.0>, ints = array<i64: 1>} : (tensor<1x2xf32>, tensor<1x2xf32>, tensor<f32>) -> ()
  exec.output "y" %y : tensor<3x2xbf16>
  return
}
