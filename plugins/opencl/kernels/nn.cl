// Pooling for the dispatch dtype T over NCHW operands (core::max_pool2d,
// core::avg_pool2d, core::avg_pool2d_backward): one work-item per output
// element, PyTorch's semantics (max: the first maximum in window order, a
// NaN taking its window, the index h * W + w; avg: PyTorch's divisor).

// Geometry and operands: sizes in elements, strides and offsets in bytes.
typedef struct {
  long n, c, in_h, in_w, out_h, out_w, kh, kw, sh, sw, ph, pw, dh, dw;
  long count_include_pad;
  long xs[4];  // the strided operand's byte strides (x; grad_out for the backward)
  long x_off;  // its byte offset
  long o_off;  // the first output's byte offset (contiguous)
  long i_off;  // the indices' byte offset (contiguous int64; max only)
} Pool;

#if T_IS_DOUBLE
typedef double ACC;
#else
typedef float ACC;
#endif

// PyTorch's avg_pool2d divisor of window (oh, ow).
inline long pool_divisor(const Pool* p, long oh, long ow) {
  long h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;
  long h1 = min(h0 + p->kh, p->in_h + p->ph), w1 = min(w0 + p->kw, p->in_w + p->pw);
  if (p->count_include_pad) return (h1 - h0) * (w1 - w0);
  h0 = max(h0, 0L);
  w0 = max(w0, 0L);
  h1 = min(h1, p->in_h);
  w1 = min(w1, p->in_w);
  return (h1 - h0) * (w1 - w0);
}

__kernel void max_pool2d(__global uchar *o, __global uchar *idx, __global const uchar *x, Pool p) {
  const long i = get_global_id(0);
  if (i >= p.n * p.c * p.out_h * p.out_w) return;
  const long ow = i % p.out_w, oh = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
  __global const uchar *xp = x + p.x_off + (plane / p.c) * p.xs[0] + (plane % p.c) * p.xs[1];
  long h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
  const long h1 = min(h0 + (p.kh - 1) * p.dh + 1, p.in_h), w1 = min(w0 + (p.kw - 1) * p.dw + 1, p.in_w);
  while (h0 < 0) h0 += p.dh;
  while (w0 < 0) w0 += p.dw;
  T_C best = T_LOWEST;
  long at = h0 * p.in_w + w0;
  for (long h = h0; h < h1; h += p.dh)
    for (long w = w0; w < w1; w += p.dw) {
      const T_C v = T_LOAD(xp + h * p.xs[2] + w * p.xs[3]);
      if (v > best || isnan(v)) {
        best = v;
        at = h * p.in_w + w;
      }
    }
  T_STORE(o + p.o_off + i * T_SIZE, best);
  *(__global long *)(idx + p.i_off + i * 8) = at;
}

__kernel void avg_pool2d(__global uchar *o, __global const uchar *x, Pool p) {
  const long i = get_global_id(0);
  if (i >= p.n * p.c * p.out_h * p.out_w) return;
  const long ow = i % p.out_w, oh = (i / p.out_w) % p.out_h, plane = i / (p.out_w * p.out_h);
  __global const uchar *xp = x + p.x_off + (plane / p.c) * p.xs[0] + (plane % p.c) * p.xs[1];
  const long h0 = max(oh * p.sh - p.ph, 0L), h1 = min(oh * p.sh - p.ph + p.kh, p.in_h);
  const long w0 = max(ow * p.sw - p.pw, 0L), w1 = min(ow * p.sw - p.pw + p.kw, p.in_w);
  ACC sum = 0;
  for (long h = h0; h < h1; ++h)
    for (long w = w0; w < w1; ++w) sum += (ACC)T_LOAD(xp + h * p.xs[2] + w * p.xs[3]);
  T_STORE(o + p.o_off + i * T_SIZE, (T_C)(sum / (ACC)pool_divisor(&p, oh, ow)));
}

// grad_x (contiguous, the input's shape) from grad_out (strided, p.xs):
// each input position gathers the windows that contain it, so no two
// work-items write one element.
__kernel void avg_pool2d_backward(__global uchar *gx, __global const uchar *g, Pool p) {
  const long i = get_global_id(0);
  if (i >= p.n * p.c * p.in_h * p.in_w) return;
  const long w = i % p.in_w, h = (i / p.in_w) % p.in_h, plane = i / (p.in_w * p.in_h);
  __global const uchar *gp = g + p.x_off + (plane / p.c) * p.xs[0] + (plane % p.c) * p.xs[1];
  const long th = h + p.ph - p.kh, tw = w + p.pw - p.kw;  // a window holds h when oh * sh > th
  const long oh0 = th < 0 ? 0 : th / p.sh + 1, oh1 = min(p.out_h, (h + p.ph) / p.sh + 1);
  const long ow0 = tw < 0 ? 0 : tw / p.sw + 1, ow1 = min(p.out_w, (w + p.pw) / p.sw + 1);
  ACC sum = 0;
  for (long oh = oh0; oh < oh1; ++oh)
    for (long ow = ow0; ow < ow1; ++ow)
      sum += (ACC)T_LOAD(gp + oh * p.xs[2] + ow * p.xs[3]) / (ACC)pool_divisor(&p, oh, ow);
  T_STORE(gx + p.o_off + i * T_SIZE, (T_C)sum);
}

// --- batch_norm over a contiguous x seen as [n, c, s] ----------------------------------
// (core::batch_norm, core::batch_norm_inference, core::batch_norm_backward).
// Per-channel statistics: one work-group of L work-items (a power of two, at
// most BN_LOCAL) per channel; element-wise passes: one work-item per element.
#define BN_LOCAL 256

typedef struct {
  long n, c, s;  // x as [n, c, s]
  long x_off, o_off, g_off;  // byte offsets: x, the output (or grad_x), grad_out
  long p_off[6];  // byte offsets of the [C] operands, by role (see nn.cpp)
} Bn;

#define BN_AT(buf, role, ch) T_LOAD((buf) + b.p_off[role] + (ch) * T_SIZE)
#define BN_X(j) (b.x_off + ((((j) / b.s) * b.c + ch) * b.s + (j) % b.s) * T_SIZE)

// The group's sum of v into buf[0] (every work-item runs it).
inline ACC group_sum(__local ACC *buf, ACC v) {
  const int lid = get_local_id(0), L = get_local_size(0);
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const ACC r = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // before the next call overwrites buf
  return r;
}

// The batch mean (role 0) and biased variance (role 1) of each channel.
__kernel void bn_stats(__global uchar *mean, __global uchar *var, __global const uchar *x, Bn b) {
  __local ACC buf[BN_LOCAL];
  const long ch = get_group_id(0);
  const int lid = get_local_id(0), L = get_local_size(0);
  const long m = b.n * b.s;
  ACC acc = 0;
  for (long j = lid; j < m; j += L) acc += (ACC)T_LOAD(x + BN_X(j));
  const ACC mu = group_sum(buf, acc) / (ACC)m;
  acc = 0;
  for (long j = lid; j < m; j += L) {
    const ACC d = (ACC)T_LOAD(x + BN_X(j)) - mu;
    acc += d * d;
  }
  const ACC v = group_sum(buf, acc) / (ACC)m;
  if (lid == 0) {
    T_STORE(mean + b.p_off[0] + ch * T_SIZE, (T_C)mu);
    T_STORE(var + b.p_off[1] + ch * T_SIZE, (T_C)v);
  }
}

// out = (x - mean) / sqrt(var + eps) * weight + bias; roles: mean 0, var 1,
// weight 2, bias 3 (the batch's or the running statistics).
__kernel void bn_apply(__global uchar *o, __global const uchar *x, __global const uchar *mean,
                       __global const uchar *var, __global const uchar *w, __global const uchar *bias,
                       Bn b, ACC eps) {
  const long i = get_global_id(0);
  if (i >= b.n * b.c * b.s) return;
  const long ch = (i / b.s) % b.c;
  const ACC inv = (ACC)1 / sqrt((ACC)BN_AT(var, 1, ch) + eps);
  const ACC y = ((ACC)T_LOAD(x + b.x_off + i * T_SIZE) - (ACC)BN_AT(mean, 0, ch)) * inv * (ACC)BN_AT(w, 2, ch) +
                (ACC)BN_AT(bias, 3, ch);
  T_STORE(o + b.o_off + i * T_SIZE, (T_C)y);
}

// The weight's (role 4) and bias's (role 5) gradients: sums of
// grad_out * xhat and of grad_out over each channel.
__kernel void bn_backward_reduce(__global uchar *gw, __global uchar *gb, __global const uchar *g,
                                 __global const uchar *x, __global const uchar *mean, __global const uchar *var,
                                 Bn b, ACC eps) {
  __local ACC buf[BN_LOCAL];
  const long ch = get_group_id(0);
  const int lid = get_local_id(0), L = get_local_size(0);
  const long m = b.n * b.s;
  const ACC mu = (ACC)BN_AT(mean, 0, ch), inv = (ACC)1 / sqrt((ACC)BN_AT(var, 1, ch) + eps);
  ACC sg = 0, sgx = 0;
  for (long j = lid; j < m; j += L) {
    const long off = BN_X(j);
    const ACC gv = (ACC)T_LOAD(g + off - b.x_off + b.g_off);
    sg += gv;
    sgx += gv * ((ACC)T_LOAD(x + off) - mu) * inv;
  }
  sg = group_sum(buf, sg);
  sgx = group_sum(buf, sgx);
  if (lid == 0) {
    T_STORE(gw + b.p_off[4] + ch * T_SIZE, (T_C)sgx);
    T_STORE(gb + b.p_off[5] + ch * T_SIZE, (T_C)sg);
  }
}

// grad_x = weight / sqrt(var + eps) * (g - sum(g) / m - xhat * sum(g * xhat) / m).
__kernel void bn_backward_apply(__global uchar *gx, __global const uchar *g, __global const uchar *x,
                                __global const uchar *mean, __global const uchar *var, __global const uchar *w,
                                __global const uchar *gw, __global const uchar *gb, Bn b, ACC eps) {
  const long i = get_global_id(0);
  if (i >= b.n * b.c * b.s) return;
  const long ch = (i / b.s) % b.c;
  const ACC m = (ACC)(b.n * b.s);
  const ACC inv = (ACC)1 / sqrt((ACC)BN_AT(var, 1, ch) + eps);
  const ACC xhat = ((ACC)T_LOAD(x + b.x_off + i * T_SIZE) - (ACC)BN_AT(mean, 0, ch)) * inv;
  const ACC gv = (ACC)T_LOAD(g + b.g_off + i * T_SIZE);
  const ACC r = (ACC)BN_AT(w, 2, ch) * inv *
                (gv - (ACC)BN_AT(gb, 5, ch) / m - xhat * (ACC)BN_AT(gw, 4, ch) / m);
  T_STORE(gx + b.o_off + i * T_SIZE, (T_C)r);
}
