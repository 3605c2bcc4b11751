// strata-kernel-check - Every kernel of a backend against the CPU backend.
//
//   strata-kernel-check [--backend cuda|async-test] [--small] [--seed N]
//
// Runs each case (a kernel, its element types, shapes with broadcasting,
// transposes, strides, repeated and negative indices, ignored labels, an
// accumulating optimizer step) on random inputs through the backend and
// through cpu::runKernel, and compares: movement, integer and update
// kernels bit for bit, the rest within a relative tolerance (fp32 2e-5 of
// the result's scale, half types 2e-2). Outputs are poisoned with NaN
// first. Prints a line per case and a summary; exits 1 on any mismatch.
// With --backend cuda on a machine without a usable GPU it prints
// "skipped: no GPU (...)" and exits 0.

#include "runtime/artifact/KernelTable.h"
#include "runtime/backends/Backend.h"
#include "runtime/backends/cpu/Kernels.h"
#include "runtime/backends/cuda/CudaBackend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/BackendRegistry.h"
#include "runtime/support/Half.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace strata;
using artifact::Kernel;
using artifact::Step;

namespace {

struct Operand {
  DType dtype;
  std::vector<int64_t> shape;
  /// How to fill it: 'n' normal, 'p' positive, 'i' indices in [-lim, lim),
  /// 'l' labels in [-1, lim) (-1: ignored), 'b' bools, 's' one scale,
  /// 'o' offsets (sorted, in [0, lim]), 'h' class `part` of a one-hot over
  /// lim classes (positions of no class too; the same positions for every
  /// operand of one case).
  char fill = 'n';
  int64_t limit = 0;
  int64_t part = 0;
};

struct Case {
  std::string name;
  Step step;
  std::vector<Operand> inputs, outputs;
  /// Bit for bit (movement, integers, updates) or within a tolerance.
  bool exact = false;
  KernelContext context;
};

int64_t count(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

void fill(const Operand &o, std::vector<char> &bytes, std::mt19937_64 &rng) {
  int64_t n = count(o.shape);
  bytes.assign(n * dtypeSize(o.dtype), 0);
  if (o.fill == 'o') {
    std::vector<int64_t> v(n);
    for (int64_t &x : v)
      x = static_cast<int64_t>(rng() % (o.limit + 1));
    std::sort(v.begin(), v.end());
    std::memcpy(bytes.data(), v.data(), n * sizeof(int64_t));
    return;
  }
  if (o.fill == 'h') {
    // Position i's class: a fixed scramble of i (the masks of one case
    // must agree), o.limit meaning none.
    for (int64_t i = 0; i < n; ++i)
      bytes[i] = (uint64_t(i) * 2654435761u + 12345u) % (o.limit + 1) ==
                 uint64_t(o.part);
    return;
  }
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    double v = normal(rng);
    if (o.fill == 'p')
      v = std::fabs(v) + 0.1;
    if (o.fill == 's')
      v = 0.5;
    if (o.fill == 'i')
      v = static_cast<double>(static_cast<int64_t>(rng() % (2 * o.limit)) -
                              o.limit);
    if (o.fill == 'l')
      v = static_cast<double>(static_cast<int64_t>(rng() % (o.limit + 1)) - 1);
    char *p = bytes.data() + i * dtypeSize(o.dtype);
    switch (o.dtype) {
    case DType::F32:
    case DType::F64:
    case DType::F16:
    case DType::BF16:
      storeFromDouble(o.dtype, v, p);
      break;
    case DType::I64: {
      int64_t x = o.fill == 'n' ? int64_t(v * 1000) : int64_t(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::I32: {
      int32_t x = o.fill == 'n' ? int32_t(v * 1000) : int32_t(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::Bool:
      *p = (rng() & 1) ? 1 : 0;
      break;
    default:
      break;
    }
  }
}

double valueAt(DType t, const char *p) {
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
    return loadAsDouble(t, p);
  case DType::I64: {
    int64_t x;
    std::memcpy(&x, p, 8);
    return double(x);
  }
  case DType::I32: {
    int32_t x;
    std::memcpy(&x, p, 4);
    return double(x);
  }
  case DType::Bool:
    return *p ? 1 : 0;
  default:
    return 0;
  }
}

/// Largest difference relative to the reference's largest magnitude; -1 if
/// a NaN appears on one side only.
double difference(DType t, const std::vector<char> &got,
                  const std::vector<char> &want) {
  size_t size = dtypeSize(t);
  double scale = 1e-30, diff = 0;
  for (size_t i = 0; i < want.size() / size; ++i)
    scale = std::max(scale, std::fabs(valueAt(t, want.data() + i * size)));
  for (size_t i = 0; i < want.size() / size; ++i) {
    double a = valueAt(t, got.data() + i * size);
    double b = valueAt(t, want.data() + i * size);
    if (std::isnan(a) != std::isnan(b))
      return -1;
    if (!std::isnan(a))
      diff = std::max(diff, std::fabs(a - b) / scale);
  }
  return diff;
}

Step step(Kernel k, std::vector<int64_t> ints = {},
          std::vector<double> floats = {}) {
  Step s;
  s.kernel = k;
  s.ints = std::move(ints);
  s.floats = std::move(floats);
  return s;
}

std::vector<Case> cases(bool small) {
  int64_t big = small ? 1 : 4; // Scales the larger shapes.
  std::vector<Case> all;
  auto add = [&](std::string name, Step s, std::vector<Operand> in,
                 std::vector<Operand> out, bool exact = false) {
    Case c;
    c.name = std::move(name);
    c.step = std::move(s);
    c.inputs = std::move(in);
    c.outputs = std::move(out);
    c.exact = exact;
    all.push_back(std::move(c));
  };
  const DType F = DType::F32, B = DType::BF16, H = DType::F16;
  // Elementwise, with broadcasting.
  for (Kernel k : {Kernel::Add, Kernel::Sub, Kernel::Mul, Kernel::Div,
                   Kernel::Max, Kernel::Min})
    for (DType t : {F, B, H})
      add(std::string(artifact::kernelName(k)) + " " + dtypeName(t), step(k),
          {{t, {4, 1, 8}}, {t, {3, 8}, k == Kernel::Div ? 'p' : 'n'}},
          {{t, {4, 3, 8}}}, k != Kernel::Div || t != F);
  add("pow f32", step(Kernel::Pow), {{F, {5, 7}, 'p'}, {F, {7}}},
      {{F, {5, 7}}});
  add("add i64", step(Kernel::Add), {{DType::I64, {6, 5}}, {DType::I64, {5}}},
      {{DType::I64, {6, 5}}}, true);
  add("mul i32", step(Kernel::Mul),
      {{DType::I32, {6, 5}}, {DType::I32, {6, 1}}}, {{DType::I32, {6, 5}}},
      true);
  for (Kernel k : {Kernel::Equal, Kernel::Less, Kernel::Greater})
    add(std::string(artifact::kernelName(k)) + " f32", step(k),
        {{F, {3, 4}}, {F, {4}}}, {{DType::Bool, {3, 4}}}, true);
  add("and bool", step(Kernel::And),
      {{DType::Bool, {9}, 'b'}, {DType::Bool, {9}, 'b'}}, {{DType::Bool, {9}}},
      true);
  add("or bool", step(Kernel::Or),
      {{DType::Bool, {3, 9}, 'b'}, {DType::Bool, {9}, 'b'}},
      {{DType::Bool, {3, 9}}}, true);
  add("not bool", step(Kernel::Not), {{DType::Bool, {77}, 'b'}},
      {{DType::Bool, {77}}}, true);
  add("select", step(Kernel::Select),
      {{DType::Bool, {4, 1}, 'b'}, {F, {4, 6}}, {F, {6}}}, {{F, {4, 6}}}, true);
  for (Kernel k :
       {Kernel::Neg, Kernel::Exp, Kernel::Log, Kernel::Sqrt, Kernel::Reciprocal,
        Kernel::Tanh, Kernel::Erf, Kernel::Sin, Kernel::Cos, Kernel::Sigmoid,
        Kernel::Relu, Kernel::Abs, Kernel::Gelu}) {
    bool positive = k == Kernel::Log || k == Kernel::Sqrt;
    bool exact = k == Kernel::Neg || k == Kernel::Relu || k == Kernel::Abs;
    add(std::string(artifact::kernelName(k)) + " f32", step(k),
        {{F, {1000 * big}, positive ? 'p' : 'n'}}, {{F, {1000 * big}}}, exact);
  }
  add("gelu tanh bf16", step(Kernel::Gelu, {1}), {{B, {512}}}, {{B, {512}}});
  add("cast f32->i64", step(Kernel::Cast), {{F, {100}}}, {{DType::I64, {100}}},
      true);
  add("cast f32->bf16", step(Kernel::Cast), {{F, {100}}}, {{B, {100}}}, true);
  add("cast i32->f32", step(Kernel::Cast), {{DType::I32, {100}}}, {{F, {100}}},
      true);
  add("cast f32->bool", step(Kernel::Cast), {{F, {100}}},
      {{DType::Bool, {100}}}, true);
  // Matrix products: batches, broadcast batches, transposes, vectors.
  add("matmul batched", step(Kernel::MatMul),
      {{F, {3, 17, 33}}, {F, {3, 33, 9}}}, {{F, {3, 17, 9}}});
  add("matmul broadcast rhs", step(Kernel::MatMul),
      {{F, {2, 5, 7}}, {F, {7, 3}}}, {{F, {2, 5, 3}}});
  add("matmul broadcast lhs", step(Kernel::MatMul),
      {{F, {5, 7}}, {F, {2, 7, 3}}}, {{F, {2, 5, 3}}});
  add("matmul transpose a", step(Kernel::MatMul, {1, 0}),
      {{F, {7, 5}}, {F, {7, 3}}}, {{F, {5, 3}}});
  add("matmul transpose b", step(Kernel::MatMul, {0, 1}),
      {{F, {5, 7}}, {F, {3, 7}}}, {{F, {5, 3}}});
  add("matmul vector", step(Kernel::MatMul), {{F, {7}}, {F, {7, 3}}},
      {{F, {3}}});
  add("matmul bf16", step(Kernel::MatMul),
      {{B, {64 * big, 128}}, {B, {128, 32}}}, {{B, {64 * big, 32}}});
  add("matmul f16", step(Kernel::MatMul), {{H, {32, 64}}, {H, {64, 16}}},
      {{H, {32, 16}}});
  // A count of live rows (negative counts clamp to none).
  add("matmul rows", step(Kernel::MatMul),
      {{F, {17, 33}}, {F, {33, 9}}, {DType::I64, {}, 'i', 20}}, {{F, {17, 9}}});
  add("matmul rows transpose a", step(Kernel::MatMul, {1, 0}),
      {{F, {17, 5}}, {F, {17, 3}}, {DType::I64, {}, 'i', 20}}, {{F, {5, 3}}});
  add("matmul rows transpose b bf16", step(Kernel::MatMul, {0, 1}),
      {{B, {17, 7}}, {B, {3, 7}}, {DType::I64, {}, 'i', 20}}, {{B, {17, 3}}});
  // Reductions, softmax, norms.
  add("reduce_sum last", step(Kernel::ReduceSum, {2, 0}), {{F, {4, 5, 300}}},
      {{F, {4, 5}}});
  add("reduce_sum middle keep", step(Kernel::ReduceSum, {1, 1}),
      {{F, {4, 5, 6}}}, {{F, {4, 1, 6}}});
  add("reduce_mean 0,2", step(Kernel::ReduceMean, {0, 2, 0}), {{F, {4, 5, 6}}},
      {{F, {5}}});
  add("reduce_max", step(Kernel::ReduceMax, {1, 0}), {{F, {7, 300}}},
      {{F, {7}}}, true);
  add("reduce_sum i64", step(Kernel::ReduceSum, {0, 0}),
      {{DType::I64, {50, 3}}}, {{DType::I64, {3}}}, true);
  // Few outputs over many elements take the chunked two-pass path.
  add("reduce_sum all, chunked", step(Kernel::ReduceSum, {0, 1, 0}),
      {{F, {3 * big, 100003}}}, {{F, {}}});
  add("reduce_mean strided, chunked", step(Kernel::ReduceMean, {0, 0}),
      {{F, {140001, 3}}}, {{F, {3}}});
  add("reduce_max chunked", step(Kernel::ReduceMax, {1, 0}), {{F, {2, 270000}}},
      {{F, {2}}}, true);
  add("reduce_sum i64 chunked", step(Kernel::ReduceSum, {0, 0}),
      {{DType::I64, {131073}}}, {{DType::I64, {}}}, true);
  add("reduce_sum_square middle", step(Kernel::ReduceSumSquare, {1, 1}),
      {{F, {4, 5, 6}}}, {{F, {4, 1, 6}}});
  add("reduce_sum_square all, chunked",
      step(Kernel::ReduceSumSquare, {0, 1, 0}), {{F, {3 * big, 100003}}},
      {{F, {}}});
  add("softmax last", step(Kernel::Softmax, {2}), {{F, {2, 3, 500}}},
      {{F, {2, 3, 500}}});
  add("softmax middle", step(Kernel::Softmax, {1}), {{F, {2, 9, 4}}},
      {{F, {2, 9, 4}}});
  add("log_softmax bf16", step(Kernel::LogSoftmax, {1}), {{B, {4, 64}}},
      {{B, {4, 64}}});
  add("layer_norm bias", step(Kernel::LayerNorm, {2, 1}, {1e-5}),
      {{F, {2, 3, 64}}, {F, {64}}, {F, {64}}}, {{F, {2, 3, 64}}});
  add("layer_norm 2-d no bias", step(Kernel::LayerNorm, {1, 0}, {1e-5}),
      {{F, {3, 4, 8}}, {F, {8}}}, {{F, {3, 4, 8}}});
  add("layer_norm rms", step(Kernel::LayerNorm, {2, 0, 1}, {1e-6}),
      {{F, {2, 3, 64}}, {F, {64}}}, {{F, {2, 3, 64}}});
  add("layer_norm_grad rms", step(Kernel::LayerNormGrad, {1, 1}, {1e-6}),
      {{F, {6, 32}}, {F, {32}}, {F, {6, 32}}},
      {{F, {6, 32}}, {F, {32}}, {F, {32}}});
  add("layer_norm_grad", step(Kernel::LayerNormGrad, {1}, {1e-5}),
      {{F, {6, 32}}, {F, {32}}, {F, {6, 32}}},
      {{F, {6, 32}}, {F, {32}}, {F, {32}}});
  add("gelu_grad erf", step(Kernel::GeluGrad, {0}), {{F, {300}}, {F, {300}}},
      {{F, {300}}});
  add("gelu_grad tanh", step(Kernel::GeluGrad, {1}), {{F, {300}}, {F, {300}}},
      {{F, {300}}});
  // Fused elementwise chains: bias + tanh GELU + scaled residual (two
  // outputs, broadcast inputs), and a gradient chain in bf16.
  {
    auto k = [](Kernel x) { return static_cast<int64_t>(x); };
    add("elementwise bias gelu residual",
        step(Kernel::Elementwise,
             {4, k(Kernel::Add), 0, 1, 0, k(Kernel::Gelu), 4, -1, 1,
              k(Kernel::Mul), 5, 3, 0, k(Kernel::Add), 6, 2, 0, 4, 7},
             {0.5}),
        {{F, {3, 5, 300}}, {F, {300}}, {F, {3, 1, 300}}},
        {{F, {3, 5, 300}}, {F, {3, 5, 300}}});
    add("elementwise gelu_grad sigmoid bf16",
        step(Kernel::Elementwise,
             {3, k(Kernel::GeluGrad), 0, 1, 0, k(Kernel::Sigmoid), 0, -1, 0,
              k(Kernel::Div), 2, 3, 0, 4}),
        {{B, {64, 33}}, {B, {64, 33}}}, {{B, {64, 33}}});
  }
  // Fused attention: causal with more keys than queries, each mask kind.
  add("attention causal", step(Kernel::Attention, {1, 0}, {0.25, 0}),
      {{F, {2, 3, 70, 32}}, {F, {2, 3, 90, 32}}, {F, {2, 3, 90, 16}}},
      {{F, {2, 3, 70, 16}}});
  add("attention additive mask", step(Kernel::Attention, {0, 1}, {0.3, 0}),
      {{F, {2, 5, 16}}, {F, {2, 7, 16}}, {F, {2, 7, 16}}, {F, {5, 7}}},
      {{F, {2, 5, 16}}});
  add("attention drop mask bf16",
      step(Kernel::Attention, {0, 3}, {0.125, -1e9}),
      {{B, {2, 2, 9, 64}},
       {B, {2, 2, 9, 64}},
       {B, {2, 2, 9, 64}},
       {DType::Bool, {1, 1, 9, 9}, 'b'}},
      {{B, {2, 2, 9, 64}}});
  add("attention_grad causal", step(Kernel::AttentionGrad, {1, 0}, {0.25, 0}),
      {{F, {2, 3, 70, 32}},
       {F, {2, 3, 90, 32}},
       {F, {2, 3, 90, 16}},
       {F, {2, 3, 70, 16}}},
      {{F, {2, 3, 70, 32}}, {F, {2, 3, 90, 32}}, {F, {2, 3, 90, 16}}});
  add("attention_grad keep mask",
      step(Kernel::AttentionGrad, {0, 2}, {0.5, -1e4}),
      {{F, {3, 6, 8}},
       {F, {3, 6, 8}},
       {F, {3, 6, 8}},
       {F, {3, 6, 8}},
       {DType::Bool, {6, 6}, 'b'}},
      {{F, {3, 6, 8}}, {F, {3, 6, 8}}, {F, {3, 6, 8}}});
  // Data movement.
  add("transpose", step(Kernel::Transpose, {2, 0, 1}), {{F, {3, 4, 5}}},
      {{F, {5, 3, 4}}}, true);
  add("slice strided", step(Kernel::Slice, {1, 0, 2, 3}), {{F, {5, 9}}},
      {{F, {2, 3}}}, true);
  add("slice_grad", step(Kernel::SliceGrad, {1, 0, 2, 3}), {{F, {2, 3}}},
      {{F, {5, 9}}}, true);
  {
    add("concat", step(Kernel::Concat, {1}),
        {{F, {2, 3, 4}}, {F, {2, 1, 4}}, {F, {2, 5, 4}}}, {{F, {2, 9, 4}}},
        true);
  }
  add("broadcast", step(Kernel::Broadcast), {{F, {3, 1}}}, {{F, {2, 3, 4}}},
      true);
  add("compact_rows", step(Kernel::CompactRows), {{DType::Bool, {1000}, 'b'}},
      {{DType::I64, {1000}}, {DType::I64, {}}}, true);
  {
    // Three experts' masks over 2,000 candidates (a fourth of them in no
    // expert), and products over groups at random offsets (the first
    // group starting past row 0, the last ending before the end).
    std::vector<Operand> masks;
    for (int64_t e = 0; e < 3; ++e)
      masks.push_back({DType::Bool, {2000}, 'h', 3, e});
    add("group_rows", step(Kernel::GroupRows), masks,
        {{DType::I64, {2000}}, {DType::I64, {4}}, {DType::I64, {}}}, true);
    Operand offsets{DType::I64, {4}, 'o', 57};
    add("grouped_matmul", step(Kernel::GroupedMatMul, {0}),
        {{F, {57, 33}}, offsets, {F, {33, 9}}, {F, {33, 9}}, {F, {33, 9}}},
        {{F, {57, 9}}});
    add("grouped_matmul transpose bf16", step(Kernel::GroupedMatMul, {1}),
        {{B, {57, 33}}, offsets, {B, {9, 33}}, {B, {9, 33}}, {B, {9, 33}}},
        {{B, {57, 9}}});
    add("segment_matmul", step(Kernel::SegmentMatMul, {1}),
        {{F, {57, 33}}, {F, {57, 9}}, offsets}, {{F, {33, 9}}});
  }
  add("trilu upper", step(Kernel::Trilu, {1, 1}), {{F, {2, 5, 6}}},
      {{F, {2, 5, 6}}}, true);
  add("trilu lower", step(Kernel::Trilu, {0, -1}), {{F, {5, 6}}}, {{F, {5, 6}}},
      true);
  add("copy", step(Kernel::Copy), {{F, {77}}}, {{F, {77}}}, true);
  add("gather rows", step(Kernel::Gather, {0}),
      {{F, {50, 16}}, {DType::I64, {2, 7}, 'i', 50}}, {{F, {2, 7, 16}}}, true);
  add("gather axis 1 i32", step(Kernel::Gather, {1}),
      {{F, {3, 10, 4}}, {DType::I32, {5}, 'i', 10}}, {{F, {3, 5, 4}}}, true);
  add("gather_grad repeats", step(Kernel::GatherGrad, {0}),
      {{F, {40, 16}}, {DType::I64, {40}, 'i', 8}}, {{F, {8, 16}}}, true);
  add("cross_entropy", step(Kernel::CrossEntropy),
      {{F, {12, 50}}, {DType::I64, {12}, 'l', 50}}, {{F, {}}});
  add("cross_entropy_grad", step(Kernel::CrossEntropyGrad),
      {{F, {12, 50}}, {DType::I64, {12}, 'l', 50}, {F, {}, 's'}},
      {{F, {12, 50}}});
  // Updates: bit for bit (shared arithmetic, no FMA contraction).
  add("update_sgd wd", step(Kernel::UpdateSgd, {}, {0.1, 0.01}),
      {{F, {1000}}, {F, {1000}}}, {}, true);
  add("update_momentum scale",
      step(Kernel::UpdateMomentum, {}, {0.1, 0.9, 0.01}),
      {{F, {1000}}, {F, {1000}}, {F, {1000}}, {F, {1}, 's'}}, {}, true);
  add("update_adamw",
      step(Kernel::UpdateAdamW, {}, {1e-3, 0.9, 0.999, 1e-8, 0.01}),
      {{F, {1000}}, {F, {1000}}, {F, {1000}, 'p'}, {F, {1000}, 'p'}}, {}, true);
  add("update_adamw accumulated",
      step(Kernel::UpdateAdamW, {2}, {1e-3, 0.9, 0.999, 1e-8, 0.0}),
      {{F, {1000}},
       {F, {1000}},
       {F, {1000}, 'p'},
       {F, {1000}, 'p'},
       {F, {1}, 's'}},
      {}, true);
  all.back().context.step = 3;
  all.back().context.lrFactor = 0.5;
  add("update_adamw bf16",
      step(Kernel::UpdateAdamW, {}, {1e-3, 0.9, 0.999, 1e-8, 0.01}),
      {{B, {500}}, {B, {500}}, {B, {500}, 'p'}, {B, {500}, 'p'}}, {}, true);
  // Mixed precision: the update writes the bf16/fp16 copy of its fp32
  // weights (the same rounding on both), and the loss reads bf16 logits.
  add("update_adamw bf16 copy",
      step(Kernel::UpdateAdamW, {1, 1}, {1e-3, 0.9, 0.999, 1e-8, 0.01}),
      {{F, {1000}},
       {F, {1000}},
       {F, {1000}, 'p'},
       {F, {1000}, 'p'},
       {F, {1}, 's'},
       {B, {1000}}},
      {}, true);
  add("update_sgd fp16 copy", step(Kernel::UpdateSgd, {1, 1}, {0.1, 0.0}),
      {{F, {999}}, {F, {999}}, {H, {999}}}, {}, true);
  add("cross_entropy bf16 logits", step(Kernel::CrossEntropy),
      {{B, {12, 50}}, {DType::I64, {12}, 'l', 50}}, {{F, {}}});
  add("cross_entropy_grad bf16 logits", step(Kernel::CrossEntropyGrad),
      {{B, {12, 50}}, {DType::I64, {12}, 'l', 50}, {F, {}, 's'}},
      {{B, {12, 50}}});
  add("accumulate", step(Kernel::Accumulate), {{F, {300}}, {F, {300}}}, {},
      true);
  // In-place copies into input 0: an update's assignment, and a store of
  // an activation swapped out (bf16: the copy keeps the bits).
  add("assign", step(Kernel::Assign), {{F, {300}}, {F, {300}}}, {}, true);
  add("assign skipped (no updates)", step(Kernel::Assign),
      {{F, {300}}, {F, {300}}}, {}, true);
  all.back().context.applyUpdates = false;
  add("store bf16", step(Kernel::Store), {{B, {4, 65}}, {B, {4, 65}}}, {},
      true);
  // A rank's shard of a parameter (--shard-optimizer): a whole one, and
  // the last rank's, padded with zeros.
  add("shard rank 1 of 4", step(Kernel::Shard, {4}), {{F, {1001}}},
      {{F, {251}}}, true);
  all.back().context.rank = 1;
  add("shard rank 3 of 4 bf16", step(Kernel::Shard, {4}), {{B, {1001}}},
      {{B, {251}}}, true);
  all.back().context.rank = 3;
  // AdaLomo sums over rows, columns and the tensor: a fixed order, but not
  // the CPU's serial one.
  add("update_adalomo factored", step(Kernel::UpdateAdaLomo, {}, {0.01, 0.01}),
      {{F, {24, 40}}, {F, {24, 40}}, {F, {24}, 'p'}, {F, {40}, 'p'}}, {});
  all.back().context.step = 2;
  add("update_adalomo full", step(Kernel::UpdateAdaLomo, {}, {0.01, 0.0}),
      {{F, {300}}, {F, {300}}, {F, {300}, 'p'}}, {});
  return all;
}

std::string format(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", v);
  return buffer;
}

} // namespace

/// The reduce-scatter and all-gather of sharded optimizer state over the
/// same communicator, as the executor calls them: rank r gives
/// ((i mod 7) + r) / 2 for i < n, and must get its shard of the mean
/// (zeros past n) bit for bit; then every rank gives the mean's shard and
/// must get the whole mean back.
void checkShardCollectives(runtime::Backend &backend, comm::Communicator &c,
                           bool direct, int &failures, int &passed) {
  int ranks = c.size();
  for (DType t : {DType::F32, DType::BF16}) {
    std::string error;
    const int64_t n = 4099, chunk = (n + ranks - 1) / ranks;
    size_t size = dtypeSize(t), bytes = n * size, shardBytes = chunk * size;
    std::vector<char> mine(bytes), mean(bytes), shard(shardBytes, 0),
        gotShard(shardBytes, 1), got(bytes, 0);
    for (int64_t i = 0; i < n; ++i) {
      storeFromDouble(t, ((i % 7) + c.rank()) * 0.5, mine.data() + i * size);
      storeFromDouble(t, ((i % 7) + (ranks - 1) / 2.0) * 0.5,
                      mean.data() + i * size);
    }
    int64_t from = std::min<int64_t>(n, c.rank() * chunk);
    std::memcpy(shard.data(), mean.data() + from * size,
                std::min<int64_t>(chunk, n - from) * size);
    void *full = backend.allocDevice(bytes, error);
    void *part = full ? backend.allocDevice(shardBytes, error) : nullptr;
    std::vector<char> hostFull(bytes), hostPart(shardBytes);
    bool ok = part && backend.copyToDevice(full, mine.data(), bytes, error);
    if (ok && direct)
      ok = c.reduceScatterMean(full, n, part, chunk, t, error);
    else if (ok)
      ok = backend.copyFromDevice(hostFull.data(), full, bytes, error) &&
           c.reduceScatterMean(hostFull.data(), n, hostPart.data(), chunk, t,
                               error) &&
           backend.copyToDevice(part, hostPart.data(), shardBytes, error);
    ok = ok && backend.copyFromDevice(gotShard.data(), part, shardBytes, error);
    bool pass = ok && gotShard == shard;
    std::printf("%-4s reduce_scatter %-4s over %d rank%s (%s)%s\n",
                pass ? "ok" : "FAIL", dtypeName(t), ranks,
                ranks == 1 ? "" : "s", c.name(),
                pass ? "" : (ok ? " DIFFERS" : (" " + error).c_str()));
    (pass ? passed : failures)++;
    // Gather the (correct) shards back into the whole mean.
    ok = part && backend.copyToDevice(part, shard.data(), shardBytes, error);
    if (ok && direct)
      ok = c.allGather(part, chunk, full, n, t, error);
    else if (ok)
      ok = backend.copyFromDevice(hostPart.data(), part, shardBytes, error) &&
           c.allGather(hostPart.data(), chunk, hostFull.data(), n, t, error) &&
           backend.copyToDevice(full, hostFull.data(), bytes, error);
    ok = ok && backend.copyFromDevice(got.data(), full, bytes, error);
    pass = ok && got == mean;
    std::printf("%-4s all_gather %-4s over %d rank%s (%s)%s\n",
                pass ? "ok" : "FAIL", dtypeName(t), ranks,
                ranks == 1 ? "" : "s", c.name(),
                pass ? "" : (ok ? " DIFFERS" : (" " + error).c_str()));
    (pass ? passed : failures)++;
    if (full)
      backend.freeDevice(full);
    if (part)
      backend.freeDevice(part);
  }
}

/// The all-reduce of the communicator a run on `backend` uses (NCCL on
/// cuda where this build has it, else MPI under mpirun, else one process)
/// on device memory, as the executor calls it: every rank gives
/// ((i mod 7) + rank) / 2 (exact in bf16), and every rank must get the mean
/// bit for bit, in place and not. False when no communicator starts.
bool checkAllReduce(runtime::Backend &backend, const std::string &backendName,
                    int &failures, int &passed) {
  std::string error;
  std::unique_ptr<comm::Communicator> world = comm::worldCommunicator(error);
  if (!world) {
    std::fprintf(stderr, "strata-kernel-check: error: %s\n", error.c_str());
    return false;
  }
  std::unique_ptr<comm::Communicator> nccl;
  if (backendName == "cuda") {
    nccl = runtime::makeNcclCommunicator(*world, error);
    if (!nccl)
      std::printf("skip all_reduce through NCCL: %s\n", error.c_str());
  }
  comm::Communicator &c = nccl ? *nccl : *world;
  bool direct = backend.deviceIsHost() || c.takesDeviceMemory();
  int ranks = c.size();
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    for (bool inPlace : {false, true}) {
      const int64_t n = 4099;
      size_t bytes = n * dtypeSize(t);
      std::vector<char> mine(bytes), want(bytes), got(bytes, 0);
      for (int64_t i = 0; i < n; ++i) {
        double v = ((i % 7) + c.rank()) * 0.5;
        double mean = ((i % 7) + (ranks - 1) / 2.0) * 0.5;
        storeFromDouble(t, v, mine.data() + i * dtypeSize(t));
        storeFromDouble(t, mean, want.data() + i * dtypeSize(t));
      }
      void *in = backend.allocDevice(bytes, error);
      void *out = inPlace ? in : backend.allocDevice(bytes, error);
      bool ok =
          in && out && backend.copyToDevice(in, mine.data(), bytes, error);
      if (ok && direct) {
        ok = c.allReduceMean(in, out, n, t, error);
      } else if (ok) {
        std::vector<char> host(bytes);
        ok = backend.copyFromDevice(host.data(), in, bytes, error) &&
             c.allReduceMean(host.data(), host.data(), n, t, error) &&
             backend.copyToDevice(out, host.data(), bytes, error);
      }
      ok = ok && backend.copyFromDevice(got.data(), out, bytes, error);
      bool pass = ok && got == want;
      std::printf("%-4s all_reduce %-4s %-8s %s over %d rank%s (%s)\n",
                  pass ? "ok" : "FAIL", dtypeName(t), inPlace ? "in place" : "",
                  pass ? "bit-identical"
                  : ok ? "DIFFERS"
                       : ("error: " + error).c_str(),
                  ranks, ranks == 1 ? "" : "s", c.name());
      (pass ? passed : failures)++;
      if (in)
        backend.freeDevice(in);
      if (out && out != in)
        backend.freeDevice(out);
    }
  }
  checkShardCollectives(backend, c, direct, failures, passed);
  return true;
}

int main(int argc, char **argv) {
  std::string backendName = "cuda";
  bool small = false;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc)
      backendName = argv[++i];
    else if (a == "--small")
      small = true;
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: strata-kernel-check [--backend cuda|async-test] "
                   "[--small] [--seed N]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  std::string error;
  std::unique_ptr<runtime::Backend> backend =
      runtime::makeBackend(backendName, error);
  if (!backend) {
    if (error.rfind("no GPU", 0) == 0 ||
        error.find("no CUDA") != std::string::npos) {
      std::printf("skipped: %s\n", error.c_str());
      return 0;
    }
    std::fprintf(stderr, "strata-kernel-check: error: %s\n", error.c_str());
    return 2;
  }
  backend->setEventCount(0);
  std::mt19937_64 rng(seed);
  int failures = 0, passed = 0;
  runtime::StepLabel label;
  std::vector<Case> all = cases(small);
  // The collectives are no backend kernels: the executor runs them through
  // the communicator this backend's runs would use, checked here.
  if (!checkAllReduce(*backend, backendName, failures, passed))
    return 2;
  // Every kernel of the table has a case: one without is a failure, so a
  // new kernel cannot go unchecked on a backend.
  for (const artifact::KernelInfo &k : artifact::kernelTable()) {
    if (k.kernel == artifact::Kernel::AllReduce ||
        k.kernel == artifact::Kernel::ReduceScatter ||
        k.kernel == artifact::Kernel::AllGather ||
        k.kernel == artifact::Kernel::Unshard)
      continue;
    bool covered = false;
    for (const Case &c : all)
      covered |= c.step.kernel == k.kernel;
    if (!covered) {
      std::printf("FAIL %-28s no case for this kernel\n", k.name);
      ++failures;
    }
  }
  for (Case &c : all) {
    // Operand slots: inputs then outputs (the Step names them by index).
    c.step.inputs.clear();
    c.step.outputs.clear();
    std::vector<std::vector<char>> inData(c.inputs.size());
    std::vector<std::vector<char>> cpuIn, cpuOut(c.outputs.size()),
        devOut(c.outputs.size());
    std::vector<TensorRef> cpuIns, cpuOuts, devIns, devOuts;
    std::vector<void *> devMem;
    bool ok = true;
    auto devAlloc = [&](uint64_t bytes) {
      void *p = backend->allocDevice(bytes, error);
      if (!p)
        ok = false;
      devMem.push_back(p);
      return p;
    };
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      fill(c.inputs[i], inData[i], rng);
      c.step.inputs.push_back(static_cast<uint32_t>(i));
    }
    cpuIn = inData;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const Operand &o = c.inputs[i];
      cpuIns.push_back({o.dtype, o.shape, cpuIn[i].data()});
      void *d = devAlloc(inData[i].size());
      if (ok)
        ok =
            backend->copyToDevice(d, inData[i].data(), inData[i].size(), error);
      devIns.push_back({o.dtype, o.shape, d});
    }
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      const Operand &o = c.outputs[i];
      c.step.outputs.push_back(static_cast<uint32_t>(c.inputs.size() + i));
      uint64_t bytes = count(o.shape) * dtypeSize(o.dtype);
      cpuOut[i].assign(bytes, char(0xff)); // NaN in every float type.
      devOut[i].assign(bytes, 0);
      cpuOuts.push_back({o.dtype, o.shape, cpuOut[i].data()});
      void *d = devAlloc(bytes);
      if (ok)
        ok = backend->copyToDevice(d, cpuOut[i].data(), bytes, error);
      devOuts.push_back({o.dtype, o.shape, d});
    }
    std::string cpuError;
    auto start = std::chrono::steady_clock::now();
    if (ok)
      ok = cpu::runKernel(c.step, cpuIns, cpuOuts, c.context, cpuError) &&
           backend->launch(artifact::Queue::Compute, c.step, devIns, devOuts,
                           c.context, label) &&
           backend->synchronize(error);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    // Compare the outputs, and the inputs an update writes in place.
    std::string verdict;
    double worst = 0;
    if (ok) {
      std::vector<std::pair<size_t, bool>> compare; // (index, is output)
      for (size_t i = 0; i < c.outputs.size(); ++i)
        compare.push_back({i, true});
      if (c.outputs.empty())
        for (size_t i = 0; i < c.inputs.size(); ++i)
          compare.push_back({i, false});
      for (auto [i, isOut] : compare) {
        const Operand &o = isOut ? c.outputs[i] : c.inputs[i];
        std::vector<char> got(isOut ? devOut[i].size() : inData[i].size());
        if (!backend->copyFromDevice(got.data(),
                                     isOut ? devOuts[i].data : devIns[i].data,
                                     got.size(), error)) {
          ok = false;
          break;
        }
        const std::vector<char> &want = isOut ? cpuOut[i] : cpuIn[i];
        if (c.exact) {
          if (got != want)
            worst = -1;
          continue;
        }
        double d = difference(o.dtype, got, want);
        worst = d < 0 || worst < 0 ? -1 : std::max(worst, d);
      }
    }
    double tolerance = 2e-5;
    for (const Operand &o : c.outputs)
      if (o.dtype == DType::BF16 || o.dtype == DType::F16)
        tolerance = 2e-2;
    bool pass = ok && worst >= 0 && worst <= tolerance;
    if (!ok)
      verdict = "error: " + (cpuError.empty() ? error : cpuError);
    else if (c.exact)
      verdict = worst == 0 ? "bit-identical" : "DIFFERS";
    else
      verdict = worst < 0 ? "NaN mismatch"
                          : "max relative difference " + format(worst);
    std::printf("%-4s %-28s %s (%.2f ms)\n", pass ? "ok" : "FAIL",
                c.name.c_str(), verdict.c_str(), ms);
    (pass ? passed : failures)++;
    for (void *p : devMem)
      if (p)
        backend->freeDevice(p);
    if (!ok) {
      // A failed backend stays failed: start a fresh one for what is left.
      backend = runtime::makeBackend(backendName, error);
      if (!backend)
        return 1;
      backend->setEventCount(0);
    }
  }
  std::printf("%s: %d of %d kernel cases match the CPU backend\n",
              backendName.c_str(), passed, passed + failures);
  return failures ? 1 : 0;
}
