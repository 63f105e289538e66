// argsort and cumsum along one dim (sort.cpp). The program is built with
// ARGSORT (role T: the input's dtype) or CUMSUM (roles T, O: the output's
// dtype, A: the accumulator's) defined. Lines along the dim are found by
// `outer`, a walk over the input's shape with the dim at size 1 (operands:
// out, in), and the element j of a line is `j * dim stride` bytes further.

#ifdef ARGSORT
// Keys are held as T_C (float for float16 and bfloat16, int for bool), in
// scratch buffers laid out line by line, `n` elements each.

// Whether a sorts strictly before b (bp::sdk::fn::sorts_before): NaN is
// greater than every number, -0.0 equals 0.0, equal keys are not before
// one another.
inline int sorts_before(T_C a, T_C b, int desc) {
#if T_IS_FLOAT
  if (desc) return a == a ? (b == b && a > b) : b == b;
  return b == b ? (a != a ? 0 : a < b) : a == a;
#else
  return desc ? b < a : a < b;
#endif
}

// Element j of every line into the scratch buffers: its key and position.
__kernel void argsort_load(__global T_C *keys, __global long *idx, __global const uchar *x,
                           Geo outer, long n, long x_dim_stride) {
  const long i = get_global_id(0);
  if (i >= outer.n * n) return;
  const long line = i / n, j = i - line * n;
  long po[4];
  geo_offsets(&outer, line, 2, po);
  keys[i] = T_LOAD(x + po[1] + j * x_dim_stride);
  idx[i] = j;
}

// One pass of a stable bottom-up merge sort of every line: the sorted runs
// of width w are merged in pairs, from (ki, ii) into (ko, io). Each element
// finds its place by counting, with a binary search, the elements of the
// other run that go before it: those sorting strictly before it when it
// is in the left run, those not sorting after it when it is in the right
// one (equal keys: the left run's first).
__kernel void argsort_merge(__global T_C *ko, __global long *io, __global const T_C *ki,
                            __global const long *ii, long total, long n, long w, int desc) {
  const long i = get_global_id(0);
  if (i >= total) return;
  const long line = i / n, p = i - line * n, base = line * n;
  const long start = p / (2 * w) * (2 * w);
  const long mid = min(start + w, n), end = min(start + 2 * w, n);
  const T_C v = ki[i];
  long dest;
  if (p < mid) {
    long lo = mid, hi = end;
    while (lo < hi) {
      const long m = lo + (hi - lo) / 2;
      if (sorts_before(ki[base + m], v, desc))
        lo = m + 1;
      else
        hi = m;
    }
    dest = p + (lo - mid);
  } else {
    long lo = start, hi = mid;
    while (lo < hi) {
      const long m = lo + (hi - lo) / 2;
      if (!sorts_before(v, ki[base + m], desc))
        lo = m + 1;
      else
        hi = m;
    }
    dest = (p - mid) + lo;
  }
  ko[base + dest] = v;
  io[base + dest] = ii[i];
}

// The sorted positions of every line into the int64 output.
__kernel void argsort_store(__global uchar *o, __global const long *idx, Geo outer, long n,
                            long o_dim_stride) {
  const long i = get_global_id(0);
  if (i >= outer.n * n) return;
  const long line = i / n, j = i - line * n;
  long po[4];
  geo_offsets(&outer, line, 2, po);
  *(__global long *)(o + po[0] + j * o_dim_stride) = idx[i];
}
#endif

#ifdef CUMSUM
// Sums in A_C: wrapping long arithmetic for bool and integers, double (or
// float without fp64) for floating dtypes. A line of `n` elements is split
// into `chunks` consecutive chunks of `per` elements (1 chunk: no parts).
#if A_IS_FLOAT
#define CS_ADD(u, v) ((u) + (v))
#else
#define CS_ADD(u, v) ((A_C)((A_U)(u) + (A_U)(v)))
#endif

// The sum of each chunk of each line, into part[line * chunks + chunk].
__kernel void cumsum_part(__global A_C *part, __global const uchar *x, Geo outer, long n,
                          long chunks, long x_dim_stride) {
  const long i = get_global_id(0);
  if (i >= outer.n * chunks) return;
  const long line = i / chunks, c = i - line * chunks;
  const long per = (n + chunks - 1) / chunks, begin = c * per, end = min(n, begin + per);
  long po[4];
  geo_offsets(&outer, line, 2, po);
  A_C acc = 0;
  for (long j = begin; j < end; ++j) acc = CS_ADD(acc, (A_C)T_LOAD(x + po[1] + j * x_dim_stride));
  part[i] = acc;
}

// Each line's chunk sums replaced, in place, by the sum of the chunks before.
__kernel void cumsum_offsets(__global A_C *part, long lines, long chunks) {
  const long line = get_global_id(0);
  if (line >= lines) return;
  __global A_C *p = part + line * chunks;
  A_C acc = 0;
  for (long c = 0; c < chunks; ++c) {
    const A_C v = p[c];
    p[c] = acc;
    acc = CS_ADD(acc, v);
  }
}

// The running sums of each chunk, from the sum of the chunks before it
// (part, read only when has_part) or 0.
__kernel void cumsum_scan(__global uchar *o, __global const uchar *x, __global const A_C *part,
                          Geo outer, long n, long chunks, long x_dim_stride, long o_dim_stride,
                          int has_part) {
  const long i = get_global_id(0);
  if (i >= outer.n * chunks) return;
  const long line = i / chunks, c = i - line * chunks;
  const long per = (n + chunks - 1) / chunks, begin = c * per, end = min(n, begin + per);
  long po[4];
  geo_offsets(&outer, line, 2, po);
  A_C acc = has_part ? part[i] : (A_C)0;
  for (long j = begin; j < end; ++j) {
    acc = CS_ADD(acc, (A_C)T_LOAD(x + po[1] + j * x_dim_stride));
    O_STORE(o + po[0] + j * o_dim_stride, (O_C)acc);
  }
}
#endif
