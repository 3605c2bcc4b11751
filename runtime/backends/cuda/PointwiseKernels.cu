// PointwiseKernels.cu - CUDA kernels: elementwise arithmetic, casts, gelu's
// gradient and fused elementwise chains.

#include "runtime/backends/cuda/KernelFamilies.cuh"

namespace strata::cuda::kernels {

namespace {

template <typename T>
__global__ void binaryKernel(Kernel k, const T *a, const T *b, T *out,
                             bool *cmp, int64_t n, Indexer<2> ix,
                             int *errorFlag) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    int64_t off[2];
    ix.offsets(i, off);
    C x = DT<T>::load(a[off[0]]), y = DT<T>::load(b[off[1]]);
    if (cmp) {
      cmp[i] = math::applyCompare<C>(k, x, y);
    } else {
      bool divByZero = false;
      out[i] = DT<T>::store(math::applyBinary<C>(k, x, y, divByZero));
      if (divByZero)
        atomicOr(errorFlag, static_cast<int>(kIntegerDivisionByZero));
    }
  }
}

template <typename T>
__global__ void selectKernel(const bool *c, const T *a, const T *b, T *out,
                             int64_t n, Indexer<3> ix) {
  STRATA_GRID_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <typename T>
__global__ void unaryKernel(Kernel k, const T *in, T *out, int64_t n,
                            bool tanhGelu) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    out[i] = DT<T>::store(math::applyUnary<C>(k, DT<T>::load(in[i]), tanhGelu));
  }
}

template <typename To, typename From>
__global__ void castKernel(const From *in, To *out, int64_t n) {
  using CFrom = typename DT<From>::C;
  using CTo = typename DT<To>::C;
  STRATA_GRID_LOOP(i, n) {
    CFrom x = DT<From>::load(in[i]);
    if constexpr (std::is_same_v<CTo, bool>) {
      out[i] = DT<To>::store(x != CFrom(0));
    } else if constexpr (std::is_floating_point_v<CFrom> &&
                         std::is_integral_v<CTo>) {
      out[i] = DT<To>::store(x != x ? CTo(0) : static_cast<CTo>(trunc(x)));
    } else {
      out[i] = DT<To>::store(static_cast<CTo>(x));
    }
  }
}

template <typename T>
__global__ void geluGradKernel(const T *x, const T *g, T *out, int64_t n,
                               bool tanhForm) {
  using C = typename DT<T>::C;
  STRATA_GRID_LOOP(i, n) {
    C d = math::geluDerivative<C>(DT<T>::load(x[i]), tanhForm);
    out[i] = DT<T>::store(d * DT<T>::load(g[i]));
  }
}

//===----------------------------------------------------------------------===//
// Fused elementwise chains: a thread per element runs the program
//===----------------------------------------------------------------------===//

using artifact::kMaxElementwiseConstants;
using artifact::kMaxElementwiseInputs;
using artifact::kMaxElementwiseInstructions;
using artifact::kMaxElementwiseOutputs;

/// artifact::ElementwiseProgram and the operands, by value.
struct ElementwiseArgs {
  int numInputs, numConstants, numInstructions, numOutputs;
  int32_t code[kMaxElementwiseInstructions][4];
  int32_t outputs[kMaxElementwiseOutputs];
  double constants[kMaxElementwiseConstants];
  const void *inputs[kMaxElementwiseInputs];
  void *outs[kMaxElementwiseOutputs];
};

template <typename T>
__global__ void elementwiseKernel(ElementwiseArgs a,
                                  Indexer<kMaxElementwiseInputs> ix,
                                  int64_t n) {
  using C = typename DT<T>::C;
  constexpr int kRegisters = kMaxElementwiseInputs + kMaxElementwiseConstants +
                             kMaxElementwiseInstructions;
  int fixed = a.numInputs + a.numConstants;
  STRATA_GRID_LOOP(i, n) {
    C r[kRegisters];
    int64_t off[kMaxElementwiseInputs];
    ix.offsets(i, off);
    for (int k = 0; k < a.numInputs; ++k)
      r[k] = DT<T>::load(static_cast<const T *>(a.inputs[k])[off[k]]);
    for (int c = 0; c < a.numConstants; ++c)
      r[a.numInputs + c] = C(a.constants[c]);
    for (int s = 0; s < a.numInstructions; ++s) {
      Kernel k = static_cast<Kernel>(a.code[s][0]);
      C x = r[a.code[s][1]], y;
      if (k == Kernel::GeluGrad) {
        y = math::geluDerivative<C>(x, a.code[s][3] != 0) * r[a.code[s][2]];
      } else if (a.code[s][2] >= 0) {
        bool divByZero = false;
        y = math::applyBinary<C>(k, x, r[a.code[s][2]], divByZero);
      } else {
        y = math::applyUnary<C>(k, x, a.code[s][3] != 0);
      }
      r[fixed + s] = y;
    }
    for (int o = 0; o < a.numOutputs; ++o)
      static_cast<T *>(a.outs[o])[i] = DT<T>::store(r[a.outputs[o]]);
  }
}

} // namespace

STRATA_KERNEL_FAMILY(launchPointwise) {
  [[maybe_unused]] cudaStream_t stream = streamOf(l);
  [[maybe_unused]] const char *name = artifact::kernelName(step.kernel);
  bool typed = true;
  switch (step.kernel) {
  case Kernel::Add:
  case Kernel::Sub:
  case Kernel::Mul:
  case Kernel::Div:
  case Kernel::Pow:
  case Kernel::Max:
  case Kernel::Min:
  case Kernel::And:
  case Kernel::Or:
  case Kernel::Equal:
  case Kernel::Less:
  case Kernel::Greater: {
    bool compare = step.kernel == Kernel::Equal ||
                   step.kernel == Kernel::Less ||
                   step.kernel == Kernel::Greater;
    int64_t n = out[0].numElements();
    auto ix = makeIndexer<2>(out[0].shape,
                             {broadcastStrides(in[0].shape, out[0].shape),
                              broadcastStrides(in[1].shape, out[0].shape)});
    typed = dispatch(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        binaryKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            step.kernel, static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data),
            compare ? nullptr : static_cast<T *>(out[0].data),
            compare ? static_cast<bool *>(out[0].data) : nullptr, n, ix,
            l.errorFlag);
    });
    break;
  }
  case Kernel::Select: {
    int64_t n = out[0].numElements();
    auto ix = makeIndexer<3>(out[0].shape,
                             {broadcastStrides(in[0].shape, out[0].shape),
                              broadcastStrides(in[1].shape, out[0].shape),
                              broadcastStrides(in[2].shape, out[0].shape)});
    byWord(dtypeSize(out[0].dtype), [&](auto w) {
      using W = decltype(w);
      if (n)
        selectKernel<W><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const bool *>(in[0].data),
            static_cast<const W *>(in[1].data),
            static_cast<const W *>(in[2].data), static_cast<W *>(out[0].data),
            n, ix);
    });
    break;
  }
  case Kernel::Neg:
  case Kernel::Exp:
  case Kernel::Log:
  case Kernel::Sqrt:
  case Kernel::Reciprocal:
  case Kernel::Tanh:
  case Kernel::Erf:
  case Kernel::Sin:
  case Kernel::Cos:
  case Kernel::Sigmoid:
  case Kernel::Relu:
  case Kernel::Not:
  case Kernel::Abs:
  case Kernel::Gelu: {
    int64_t n = out[0].numElements();
    bool tanhGelu =
        step.kernel == Kernel::Gelu && !step.ints.empty() && step.ints[0] != 0;
    typed = dispatch(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        unaryKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            step.kernel, static_cast<const T *>(in[0].data),
            static_cast<T *>(out[0].data), n, tanhGelu);
    });
    break;
  }
  case Kernel::Cast: {
    int64_t n = out[0].numElements();
    typed = dispatch(in[0].dtype,
                     [&](auto from) {
                       using From = decltype(from);
                       typed = dispatch(out[0].dtype, [&](auto to) {
                         using To = decltype(to);
                         if (n)
                           castKernel<To, From>
                               <<<blocksFor(n), kThreads, 0, stream>>>(
                                   static_cast<const From *>(in[0].data),
                                   static_cast<To *>(out[0].data), n);
                       });
                     }) &&
            typed;
    break;
  }
  case Kernel::Elementwise: {
    artifact::ElementwiseProgram p;
    if (!artifact::elementwiseProgram(step.ints, step.floats, in.size(),
                                      out.size(), p, error))
      return false;
    ElementwiseArgs a{};
    a.numInputs = p.numInputs;
    a.numConstants = p.numConstants;
    a.numInstructions = static_cast<int>(p.instructions.size());
    a.numOutputs = static_cast<int>(p.outputs.size());
    for (size_t s = 0; s < p.instructions.size(); ++s) {
      const auto &ins = p.instructions[s];
      a.code[s][0] = static_cast<int32_t>(ins.kernel);
      a.code[s][1] = ins.a;
      a.code[s][2] = ins.b;
      a.code[s][3] = ins.flag;
    }
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      a.outputs[o] = p.outputs[o];
      a.outs[o] = out[o].data;
    }
    for (size_t c = 0; c < step.floats.size(); ++c)
      a.constants[c] = step.floats[c];
    std::array<Shape, kMaxElementwiseInputs> strides;
    for (size_t k = 0; k < strides.size(); ++k) {
      strides[k] = Shape(out[0].shape.size(), 0);
      if (k < in.size()) {
        strides[k] = broadcastStrides(in[k].shape, out[0].shape);
        a.inputs[k] = in[k].data;
      }
    }
    auto ix = makeIndexer<kMaxElementwiseInputs>(out[0].shape, strides);
    int64_t n = out[0].numElements();
    typed = dispatchFloat(out[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        elementwiseKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(a, ix, n);
    });
    break;
  }
  case Kernel::GeluGrad: {
    int64_t n = in[0].numElements();
    typed = dispatchFloat(in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      if (n)
        geluGradKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(
            static_cast<const T *>(in[0].data),
            static_cast<const T *>(in[1].data), static_cast<T *>(out[0].data),
            n, !step.ints.empty() && step.ints[0] != 0);
    });
    break;
  }
  default:
    return std::nullopt;
  }
  return finishLaunch(typed, name, in, error);
}

} // namespace strata::cuda::kernels
