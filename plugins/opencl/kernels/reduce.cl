// Reductions: one work-group per output element. Each work-item folds a
// strided share of the reduced elements (j = lid, lid + L, ...), then the
// group combines the partial results in local memory. Roles: T the input's
// dtype, O the output's, A the accumulator's (double for floating sums and
// products where the device has fp64, long for integer ones).
#define RED_ARGS __global uchar *o, __global const uchar *x, Geo outer, Geo inner, __global int *err
#define MAX_LOCAL 256

#if A_IS_FLOAT
#define ACC_ADD(u, v) ((u) + (v))
#define ACC_MUL(u, v) ((u) * (v))
#else
#define ACC_ADD(u, v) ((A_C)((A_U)(u) + (A_U)(v)))
#define ACC_MUL(u, v) ((A_C)((A_U)(u) * (A_U)(v)))
#endif
#define ACC_MAX(u, v) NAN_MAX(A, u, v)
#define ACC_MIN(u, v) NAN_MIN(A, u, v)
#define PLUS(u, v) ((u) + (v))

// The group's values v (one per work-item, L a power of two) combined into
// buf[0] in local memory; every work-item of the group runs it.
#define GROUP_FOLD(buf, v, COMBINE)                              \
  buf[lid] = (v);                                                \
  barrier(CLK_LOCAL_MEM_FENCE);                                  \
  for (int s = L / 2; s > 0; s >>= 1) {                          \
    if (lid < s) buf[lid] = COMBINE(buf[lid], buf[lid + s]);     \
    barrier(CLK_LOCAL_MEM_FENCE);                                \
  }

#define REDUCE(name, IDENT, COMBINE)                                       \
  __kernel void name(RED_ARGS) {                                           \
    __local A_C buf[MAX_LOCAL];                                            \
    const long gi = get_group_id(0);                                       \
    const int lid = get_local_id(0), L = get_local_size(0);                \
    if (gi >= outer.n) return; /* the whole group: no barrier is split */  \
    long po[4], q[4];                                                      \
    geo_offsets(&outer, gi, 2, po);                                        \
    A_C acc = IDENT;                                                       \
    for (long j = lid; j < inner.n; j += L) {                              \
      geo_offsets(&inner, j, 1, q);                                        \
      const A_C v = (A_C)T_LOAD(x + po[1] + q[0]);                         \
      acc = COMBINE(acc, v);                                               \
    }                                                                      \
    GROUP_FOLD(buf, acc, COMBINE)                    \
    if (lid == 0) O_STORE(o + po[0], (O_C)buf[0]);                         \
  }

REDUCE(sum, (A_C)0, ACC_ADD)
REDUCE(prod, (A_C)1, ACC_MUL)
REDUCE(max_, A_LOWEST, ACC_MAX)
REDUCE(min_, A_HIGHEST, ACC_MIN)

// Large reductions into few outputs in two passes: `chunks` work-groups per
// output each fold one slice of the reduced elements into `part` (the
// accumulator's type), then one work-item per output folds its partials in
// order. Without this a sum of 64M elements into one output would run on
// one work-group.
#define REDUCE_PARTS(name, IDENT, COMBINE)                                      \
  __kernel void name##_part(__global uchar *part, __global const uchar *x, Geo outer,  \
                            Geo inner, long chunks) {                             \
    __local A_C buf[MAX_LOCAL];                                                 \
    const long gi = get_group_id(0);                                            \
    const int lid = get_local_id(0), L = get_local_size(0);                     \
    const long oi = gi / chunks, ci = gi - oi * chunks;                         \
    if (oi >= outer.n) return;                                                  \
    const long per = (inner.n + chunks - 1) / chunks;                           \
    const long begin = ci * per, end = min(inner.n, begin + per);               \
    long po[4], q[4];                                                           \
    geo_offsets(&outer, oi, 2, po);                                             \
    A_C acc = IDENT;                                                            \
    for (long j = begin + lid; j < end; j += L) {                               \
      geo_offsets(&inner, j, 1, q);                                             \
      acc = COMBINE(acc, (A_C)T_LOAD(x + po[1] + q[0]));                        \
    }                                                                           \
    GROUP_FOLD(buf, acc, COMBINE)                    \
    if (lid == 0) ((__global A_C *)part)[gi] = buf[0];                          \
  }                                                                             \
  __kernel void name##_final(__global uchar *o, __global const uchar *part, Geo outer, \
                             long chunks) {                                     \
    const long oi = get_global_id(0);                                           \
    if (oi >= outer.n) return;                                                  \
    long po[4];                                                                 \
    geo_offsets(&outer, oi, 2, po);                                             \
    __global const A_C *p = (__global const A_C *)part + oi * chunks;           \
    A_C acc = IDENT;                                                            \
    for (long c = 0; c < chunks; ++c) acc = COMBINE(acc, p[c]);                 \
    O_STORE(o + po[0], (O_C)acc);                                               \
  }

REDUCE_PARTS(sum, (A_C)0, ACC_ADD)
REDUCE_PARTS(prod, (A_C)1, ACC_MUL)
REDUCE_PARTS(max_, A_LOWEST, ACC_MAX)
REDUCE_PARTS(min_, A_HIGHEST, ACC_MIN)

// v beats best: NaN counts as maximal (argmax) and minimal (argmin); a NaN
// already held is never replaced.
#define BEATS_MAX(v, best) (!((best) != (best)) && ((v) != (v) || (v) > (best)))
#define BEATS_MIN(v, best) (!((best) != (best)) && ((v) != (v) || (v) < (best)))

// Over the single dim of `inner`; out (int64) gets the index along it.
// Work-items walk increasing indices, and ties between them go to the
// smaller index: the first occurrence wins.
#define ARGREDUCE(name, BEATS)                                                       \
  __kernel void name(RED_ARGS) {                                                     \
    __local A_C bv[MAX_LOCAL];                                                       \
    __local long bi[MAX_LOCAL];                                                      \
    const long gi = get_group_id(0);                                                 \
    const int lid = get_local_id(0), L = get_local_size(0);                          \
    long po[4], q[4];                                                                \
    if (gi >= outer.n) return; geo_offsets(&outer, gi, 2, po);                                                  \
    A_C best = 0;                                                                    \
    long idx = -1;                                                                   \
    for (long j = lid; j < inner.n; j += L) {                                        \
      geo_offsets(&inner, j, 1, q);                                                  \
      const A_C v = (A_C)T_LOAD(x + po[1] + q[0]);                                   \
      if (idx < 0 || BEATS(v, best)) {                                               \
        best = v;                                                                    \
        idx = j;                                                                     \
      }                                                                              \
    }                                                                                \
    bv[lid] = best;                                                                  \
    bi[lid] = idx;                                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                    \
    for (int s = L / 2; s > 0; s >>= 1) {                                            \
      if (lid < s) {                                                                 \
        const A_C va = bv[lid], vb = bv[lid + s];                                    \
        const long ia = bi[lid], ib = bi[lid + s];                                   \
        if (ib >= 0 && (ia < 0 || BEATS(vb, va) || (!BEATS(va, vb) && ib < ia))) {   \
          bv[lid] = vb;                                                              \
          bi[lid] = ib;                                                              \
        }                                                                            \
      }                                                                              \
      barrier(CLK_LOCAL_MEM_FENCE);                                                  \
    }                                                                                \
    if (lid == 0) *(__global long *)(o + po[0]) = bi[0] < 0 ? 0 : bi[0];             \
  }

ARGREDUCE(argmax, BEATS_MAX)
ARGREDUCE(argmin, BEATS_MIN)

// softmax / log_softmax along the dim of `inner` (operands: out, in), one
// row per work-group: the row's maximum, the sum of exp(x - max), then the
// values.
#define SOFTMAX(name, LOG)                                                     \
  __kernel void name(RED_ARGS) {                                               \
    __local A_C buf[MAX_LOCAL];                                                \
    const long gi = get_group_id(0);                                           \
    const int lid = get_local_id(0), L = get_local_size(0);                    \
    long po[4], q[4];                                                          \
    if (gi >= outer.n) return; geo_offsets(&outer, gi, 2, po);                                            \
    A_C m = A_LOWEST;                                                          \
    for (long j = lid; j < inner.n; j += L) {                                  \
      geo_offsets(&inner, j, 2, q);                                            \
      const A_C v = (A_C)T_LOAD(x + po[1] + q[1]);                             \
      m = ACC_MAX(m, v);                                                       \
    }                                                                          \
    GROUP_FOLD(buf, m, ACC_MAX)                    \
    m = buf[0];                                                                \
    barrier(CLK_LOCAL_MEM_FENCE);                                              \
    A_C sum = 0;                                                               \
    for (long j = lid; j < inner.n; j += L) {                                  \
      geo_offsets(&inner, j, 2, q);                                            \
      sum += exp((A_C)T_LOAD(x + po[1] + q[1]) - m);                           \
    }                                                                          \
    GROUP_FOLD(buf, sum, PLUS)                    \
    sum = buf[0];                                                              \
    for (long j = lid; j < inner.n; j += L) {                                  \
      geo_offsets(&inner, j, 2, q);                                            \
      const A_C v = (A_C)T_LOAD(x + po[1] + q[1]) - m;                         \
      T_STORE(o + po[0] + q[0], LOG ? v - log(sum) : exp(v) / sum);            \
    }                                                                          \
  }

#if T_IS_FLOAT
SOFTMAX(softmax, 0)
SOFTMAX(log_softmax, 1)
#endif
