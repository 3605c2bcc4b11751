// StreamingUpdatesBody.h - The vector loops of StreamingUpdates, written
// once over a vector type. Included only by the per-ISA files
// (StreamingUpdatesAvx2.cpp, StreamingUpdatesAvx512.cpp), each inside an
// anonymous namespace after defining, for its vector type `Vec`:
// kWidth, vload, vstore, vset, vadd, vsub, vmul, vdiv, vsqrt.
// Nothing here may call an inline function shared with the baseline build:
// the linker could keep this file's wider-ISA copy for every caller.
//
// Each loop handles the first n - n % kWidth elements and returns how many
// it did; the caller finishes the tail with the scalar code. The order of
// operations is SharedMath.h's, operation for operation.

using strata::cpu::detail::Coefficients;

int64_t sgdLoop(float *w, const float *g, int64_t n, const Coefficients &c) {
  int64_t done = n - n % kWidth;
  Vec scale = vset(c.scale), wd = vset(c.wd), lr = vset(c.lr);
  for (int64_t i = 0; i < done; i += kWidth) {
    Vec wi = vload(w + i);
    Vec d = vmul(vload(g + i), scale);
    if (c.wd != 0)
      d = vadd(d, vmul(wd, wi));
    vstore(w + i, vsub(wi, vmul(lr, d)));
  }
  return done;
}

int64_t momentumLoop(float *w, const float *g, float *buf, int64_t n,
                     const Coefficients &c) {
  int64_t done = n - n % kWidth;
  Vec scale = vset(c.scale), wd = vset(c.wd), lr = vset(c.lr),
      mom = vset(c.momentum);
  for (int64_t i = 0; i < done; i += kWidth) {
    Vec wi = vload(w + i);
    Vec d = vmul(vload(g + i), scale);
    if (c.wd != 0)
      d = vadd(d, vmul(wd, wi));
    Vec b = c.first ? d : vadd(vmul(vload(buf + i), mom), d);
    vstore(buf + i, b);
    vstore(w + i, vsub(wi, vmul(lr, b)));
  }
  return done;
}

int64_t adamwLoop(float *w, const float *g, float *m, float *v, int64_t n,
                  const Coefficients &c) {
  int64_t done = n - n % kWidth;
  Vec scale = vset(c.scale), decay = vset(c.decay), b1 = vset(c.b1),
      b2 = vset(c.b2), oneMinusB1 = vset(1.0f - c.b1),
      oneMinusB2 = vset(1.0f - c.b2), eps = vset(c.eps),
      bc2Sqrt = vset(c.bc2Sqrt), stepSize = vset(c.stepSize);
  for (int64_t i = 0; i < done; i += kWidth) {
    Vec gi = vmul(vload(g + i), scale);
    Vec wi = vmul(vload(w + i), decay);
    Vec mi = vadd(vmul(vload(m + i), b1), vmul(gi, oneMinusB1));
    Vec vi = vadd(vmul(vload(v + i), b2), vmul(vmul(gi, gi), oneMinusB2));
    Vec denom = vadd(vdiv(vsqrt(vi), bc2Sqrt), eps);
    vstore(m + i, mi);
    vstore(v + i, vi);
    vstore(w + i, vsub(wi, vmul(stepSize, vdiv(mi, denom))));
  }
  return done;
}
