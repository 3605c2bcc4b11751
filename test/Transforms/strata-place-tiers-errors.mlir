// RUN: strata-opt %s --verify-diagnostics --strata-place-tiers="gpu-mem=4096 cpu-mem=4096 place-params=host"
// RUN: not strata-opt %s --strata-place-tiers=place-params=nvme 2>&1 | FileCheck %s --check-prefix=TIER
// RUN: not strata-opt %s --strata-place-tiers=place-activations=disk 2>&1 | FileCheck %s --check-prefix=ACTS
// RUN: not strata-opt %s --strata-place-tiers=place-activations=ssd 2>&1 | FileCheck %s --check-prefix=ACTSSD
// RUN: not strata-opt %s --strata-place-tiers=place-gradients=ssd 2>&1 | FileCheck %s --check-prefix=GRADSSD
// RUN: not strata-opt %s --strata-place-tiers=place-params=ssd 2>&1 | FileCheck %s --check-prefix=PARAMSSD
// The budgets take units, as strata-compile's flags do, and refuse the rest.
// RUN: strata-opt %s --verify-diagnostics --strata-place-tiers="gpu-mem=4KiB cpu-mem=4KiB place-params=host"
// RUN: not strata-opt %s --strata-place-tiers=gpu-mem=12XB 2>&1 | FileCheck %s --check-prefix=SIZE

// Every error --strata-place-tiers reports. Two more are internal
// invariants (a placement whose candidate counts differ from the program's;
// gradients placed on the SSD without one, which the option check refuses
// first).
// TIER: error: unknown tier 'nvme' (auto, device, host or ssd)
// ACTS: error: unknown activation placement 'disk' (auto, device, host, ssd or recompute)
// ACTSSD: error: activations on the SSD need --ssd-dir
// GRADSSD: error: gradients on the SSD need --ssd-dir
// PARAMSSD: error: placed on the SSD, but no --ssd-dir was given
// SIZE: for the --gpu-mem option: '12XB' is not a byte count (e.g. 24GiB)

// Tests a plan that puts more on the host than the host budget holds,
// without an SSD to take the rest (16 KiB of parameters forced to the host,
// 4 KiB of each memory; strata-compile explains the forcing flags).
// expected-error @below {{the device budget (4096 bytes) needs 16384 bytes of tensors on the host, over the host budget (4096 bytes), and no --ssd-dir was given}}
func.func @main() {
  %x = exec.input "x" : tensor<1024xf32>
  %w = exec.param "w" trainable {value = dense<1.0> : tensor<1024xf32>} : tensor<1024xf32>
  %v = exec.param "v" trainable {value = dense<1.0> : tensor<1024xf32>} : tensor<1024xf32>
  %u = exec.param "u" trainable {value = dense<1.0> : tensor<1024xf32>} : tensor<1024xf32>
  %t = exec.param "t" trainable {value = dense<1.0> : tensor<1024xf32>} : tensor<1024xf32>
  %a = exec.kernel "add"(%x, %w) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %b = exec.kernel "add"(%a, %v) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %c = exec.kernel "add"(%b, %u) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %d = exec.kernel "add"(%c, %t) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  exec.output "y" %d : tensor<1024xf32>
  return
}
