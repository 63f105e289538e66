// The core's fused optimiser updates for the dispatch dtype T (float or
// double): core::sgd_step and core::adam_step, one work-item per element of
// dense operands that share one layout, each walked as one flat block from
// its byte offset. The step's constants come from the host, worked out in
// double as the core's composite does.

__kernel void sgd_step(__global uchar *p, __global uchar *buf, __global const uchar *g, long p_off, long b_off,
                       long g_off, long n, T_C lr, T_C momentum, T_C keep, int nesterov, int negate, int first) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const long o = i * T_SIZE;
  const T_C gi = T_LOAD(g + g_off + o);
  const T_C d = negate ? -gi : gi;
  const T_C m = first ? d : T_LOAD(buf + b_off + o) * momentum + keep * d;
  T_STORE(buf + b_off + o, m);
  T_STORE(p + p_off + o, T_LOAD(p + p_off + o) - lr * (nesterov ? d + momentum * m : m));
}

// step_size = -lr / (1 - beta1^step), bc2_sqrt = sqrt(1 - beta2^step).
__kernel void adam_step(__global uchar *p, __global uchar *m, __global uchar *v, __global const uchar *g,
                        long p_off, long m_off, long v_off, long g_off, long n, T_C b1, T_C b2, T_C one_b1, T_C one_b2,
                        T_C eps, T_C bc2_sqrt, T_C step_size, int negate) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const long o = i * T_SIZE;
  const T_C gl = T_LOAD(g + g_off + o);
  const T_C gi = negate ? -gl : gl;
  const T_C mi = T_LOAD(m + m_off + o) * b1 + one_b1 * gi;
  const T_C vi = T_LOAD(v + v_off + o) * b2 + one_b2 * (gi * gi);
  T_STORE(m + m_off + o, mi);
  T_STORE(v + v_off + o, vi);
  T_STORE(p + p_off + o, T_LOAD(p + p_off + o) + step_size * (mi / (sqrt(vi) / bc2_sqrt + eps)));
}
