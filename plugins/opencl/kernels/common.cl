// Shared by every program of the opencl plugin. The host prepends, for each
// dtype role the program uses (T: the dispatch dtype, O: an output's, A: an
// accumulator's), macros that say how that dtype is stored and computed:
//   R_C            the type values are computed in (float for float16 and
//                  bfloat16, int for bool, the dtype itself otherwise)
//   R_U            its unsigned twin, for integer arithmetic that wraps
//   R_LOAD(p)      the value at byte address p, as R_C
//   R_STORE(p, v)  stores v (rounded to nearest even, or v != 0 for bool)
//   R_SCALAR(bits) a scalar attribute, passed as the bits of a long, a
//                  float or a double (see launch.cpp)
//   R_LOWEST, R_HIGHEST   the identities of max and min (-inf, +inf for floats)
//   R_IS_FLOAT, R_IS_BOOL, R_IS_DOUBLE, R_SIZE (bytes stored)
// Operands travel as a buffer plus a byte offset; shapes and byte strides in
// a struct passed by value (no device memory, no copy per launch), dims
// innermost first.

#define MAX_DIMS 8

// A walk over `n` elements of up to four operands that share a shape.
typedef struct {
  long n;
  long ndim;
  long size[MAX_DIMS];
  long st[4][MAX_DIMS];  // byte strides, [operand][dim]
  long off[4];           // byte offset of each operand's first element
} Geo;

// Byte offsets of element i (in the walk's order) of the first k operands;
// returns the coordinate along dim `sdim` (none when it is -1).
inline long geo_offsets_at(const Geo* g, long i, int k, long* out, long sdim) {
  long coord = 0;
  for (int o = 0; o < k; ++o) out[o] = g->off[o];
  for (int d = 0; d < g->ndim; ++d) {
    long r = i;
    if (d + 1 < g->ndim) {
      const long q = i / g->size[d];
      r = i - q * g->size[d];
      i = q;
    }
    if (d == sdim) coord = r;
    for (int o = 0; o < k; ++o) out[o] += r * g->st[o][d];
  }
  return coord;
}

inline void geo_offsets(const Geo* g, long i, int k, long* out) {
  geo_offsets_at(g, i, k, out, -1);
}

inline float bf16_to_float(ushort b) { return as_float(((uint)b) << 16); }
inline ushort float_to_bf16(float f) {
  const uint x = as_uint(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((x >> 16) | 0x40u);  // quiet NaN
  return (ushort)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// The stream's error record (see streams.cpp): the first failure claims it.
#define ERR_INDEX_OUT_OF_RANGE 1
#define ERR_NEGATIVE_EXPONENT 2
inline void record_error(__global int* err, int code, int op, long value, long limit, int dim) {
  if (atomic_cmpxchg(err, 0, code) != 0) return;
  err[1] = op;
  err[2] = (int)(value & 0xFFFFFFFF);
  err[3] = (int)(value >> 32);
  err[4] = (int)(limit & 0xFFFFFFFF);
  err[5] = (int)(limit >> 32);
  err[6] = dim;
}

// NaN-propagating max and min (PyTorch's maximum/minimum).
#define NAN_MAX(R, x, y) (R##_IS_FLOAT && (x) != (x) ? (x) : R##_IS_FLOAT && (y) != (y) ? (y) : (x) < (y) ? (y) : (x))
#define NAN_MIN(R, x, y) (R##_IS_FLOAT && (x) != (x) ? (x) : R##_IS_FLOAT && (y) != (y) ? (y) : (y) < (x) ? (y) : (x))

// The arguments of every elementwise kernel (pointwise, copy, random).
#define POINTWISE_ARGS                                                                   \
  __global uchar *o, __global const uchar *a, __global const uchar *b,                  \
      __global const uchar *c, Geo g, long s0, long s1, long iarg, __global int *err

// DENSE (a program variant, see launch.cpp): every operand is one run of
// consecutive elements, so element i is at off + i * stride: no division,
// and the compiler can vectorise across work-items.
#ifdef DENSE
#define BEGIN(k)                                               \
  const long i = get_global_id(0);                             \
  if (i >= g.n) return;                                        \
  long p[4];                                                   \
  for (int o_ = 0; o_ < k; ++o_) p[o_] = g.off[o_] + i * g.st[o_][0];
#else
#define BEGIN(k)                  \
  const long i = get_global_id(0); \
  if (i >= g.n) return;            \
  long p[4];                       \
  geo_offsets(&g, i, k, p);
#endif
