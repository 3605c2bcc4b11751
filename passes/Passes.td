//===- Passes.td - Strata passes ---------------------------*- tablegen -*-===//

#ifndef STRATA_PASSES_PASSES_TD
#define STRATA_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerGraphToExecPass : Pass<"strata-lower-graph-to-exec", "mlir::ModuleOp"> {
  let summary = "Lower graph ops to exec kernel launches on buffers";
  let description = [{
    Bufferizes the graph: each function argument becomes an `exec.input`,
    each parameter and constant an `exec.param` stored in the artifact, each
    computation an `exec.kernel` producing a new buffer, and each reshape an
    `exec.view` of its operand's bytes. Results become `exec.output`s.
    Axis attributes become the `ints`/`floats` the runtime kernels read.

    Before:
    ```mlir
    func.func @main(%x: tensor<2x4xf32> {graph.name = "x"}) -> (tensor<8xf32> {graph.name = "y"}) {
      %r = graph.relu %x : tensor<2x4xf32>
      %y = graph.reshape %r : tensor<2x4xf32> -> tensor<8xf32>
      return %y : tensor<8xf32>
    }
    ```
    After:
    ```mlir
    func.func @main() {
      %x = exec.input "x" : tensor<2x4xf32>
      %r = exec.kernel "relu"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %y = exec.view %r : tensor<2x4xf32> -> tensor<8xf32>
      exec.output "y" %y : tensor<8xf32>
      return
    }
    ```
  }];
  let dependentDialects = ["::strata::exec::ExecDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of kernel launches created">,
    Statistic<"numViews", "views", "Number of reshapes turned into views">
  ];
}

def PlanMemoryPass : Pass<"strata-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign every buffer an offset in its region";
  let description = [{
    A static memory plan with liveness-based reuse. A buffer is live from the
    op that defines it to its last use, where a use of an `exec.view` is a
    use of the viewed buffer and outputs live to the end. Buffers are placed
    largest first at the lowest 64-byte-aligned offset that does not overlap
    a buffer with an overlapping lifetime (so a kernel never writes over its
    own operands). Parameters and constants are laid out in order at 4 KiB
    alignment, as params.bin stores them.

    Sets `offset` on every `exec.input`, `exec.kernel` and `exec.param`, and
    `exec.arena_bytes` / `exec.params_bytes` on the function: the arena size
    is the plan's peak, which the runtime's accounting reports back.

    ```mlir
    %a = exec.kernel "exp"(%x) {offset = 64 : i64} : (tensor<16xf32>) -> tensor<16xf32>
    %b = exec.kernel "exp"(%a) {offset = 0 : i64} : (tensor<16xf32>) -> tensor<16xf32>
    ```
  }];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Number of arena buffers placed">,
    Statistic<"arenaBytes", "arena-bytes", "Size of the device arena">,
    Statistic<"unsharedBytes", "unshared-bytes",
              "Arena size without reuse (sum of all buffers)">
  ];
}

#endif // STRATA_PASSES_PASSES_TD
