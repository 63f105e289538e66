// Index ops for the dispatch dtype T. Indices are int64; one out of range
// is recorded in the stream's error record (op, index, size, dim) and the
// element is left alone.

// out[i] = x[i with the coordinate along `dim` replaced by index[i]].
// Walk over out's shape; operands: out, index, x (stride 0 along dim).
__kernel void gather(__global uchar *o, __global const uchar *x, __global const uchar *index,
                     Geo g, long dim_size, long x_dim_stride, int op, int dim,
                     __global int *err) {
  const long i = get_global_id(0);
  if (i >= g.n) return;
  long p[4];
  geo_offsets(&g, i, 3, p);
  const long k = *(__global const long *)(index + p[1]);
  if (k < 0 || k >= dim_size) {
    record_error(err, ERR_INDEX_OUT_OF_RANGE, op, k, dim_size, dim);
    return;
  }
  T_STORE(o + p[0], T_LOAD(x + p[2] + k * x_dim_stride));
}

// out = x selected along `sdim` (a dim of the walk) by the 1-D index.
// Operands: out, x (stride 0 along the dim).
__kernel void index_select(__global uchar *o, __global const uchar *x,
                           __global const uchar *index, Geo g, long sdim, long index_stride,
                           long index_offset, long dim_size, long x_dim_stride, int op, int dim,
                           __global int *err) {
  const long i = get_global_id(0);
  if (i >= g.n) return;
  long p[4];
  const long c = geo_offsets_at(&g, i, 2, p, sdim);
  const long k = *(__global const long *)(index + index_offset + c * index_stride);
  if (k < 0 || k >= dim_size) {
    record_error(err, ERR_INDEX_OUT_OF_RANGE, op, k, dim_size, dim);
    return;
  }
  T_STORE(o + p[0], T_LOAD(x + p[1] + k * x_dim_stride));
}

// Checks every index of a scatter before it runs (the scatter does nothing
// when one is out of range, so a failed call changes nothing): walk over
// the index's shape.
__kernel void check_index(__global const uchar *index, Geo g, long dim_size, int op, int dim,
                          __global int *err, __global int *flag) {
  const long i = get_global_id(0);
  if (i >= g.n) return;
  long p[4];
  geo_offsets(&g, i, 1, p);
  const long k = *(__global const long *)(index + p[0]);
  if (k < 0 || k >= dim_size) {
    record_error(err, ERR_INDEX_OUT_OF_RANGE, op, k, dim_size, dim);
    *flag = 1;
  }
}

// out[index[i] along dim] = src[i] (reduce 0) or += src[i] (reduce 1). The
// walk covers index's shape with `dim` collapsed (operands: out, index,
// src); each work-item runs along dim in order, so elements that may write
// the same output are handled by one work-item, in order: the last write
// wins and every duplicate is added, with no atomics.
__kernel void scatter_(__global uchar *o, __global const uchar *index, __global const uchar *src,
                       Geo g, long count, long o_dim_stride, long index_dim_stride,
                       long src_dim_stride, long dim_size, long reduce, int op, int dim,
                       __global int *err, __global const int *flag) {
  const long i = get_global_id(0);
  if (i >= g.n || *flag) return;
  long p[4];
  geo_offsets(&g, i, 3, p);
  for (long j = 0; j < count; ++j) {
    const long k = *(__global const long *)(index + p[1] + j * index_dim_stride);
    if (k < 0 || k >= dim_size) {
      record_error(err, ERR_INDEX_OUT_OF_RANGE, op, k, dim_size, dim);
      continue;
    }
    __global uchar *dst = o + p[0] + k * o_dim_stride;
    const T_C v = T_LOAD(src + p[2] + j * src_dim_stride);
#if T_IS_FLOAT
    T_STORE(dst, reduce ? T_LOAD(dst) + v : v);
#else
    T_STORE(dst, reduce ? (T_C)((T_U)T_LOAD(dst) + (T_U)v) : v);
#endif
  }
}
