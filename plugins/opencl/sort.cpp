// argsort and cumsum along one dim (ABI 2.8): kernels/sort.cl.
// argsort copies each line's keys and positions into scratch buffers, line
// after line, sorts them with a stable bottom-up merge sort (one launch per
// pass, one work-item per element, ping-ponging between two pairs of
// buffers), then writes the positions out. cumsum runs one work-item per
// line, or for few long lines, per chunk of a line in three passes (chunk
// sums, their running sums per line, the chunks' running sums from those).
#include <algorithm>
#include <utility>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

bool floating(bp_dtype d) {
  return d == BP_DTYPE_FLOAT16 || d == BP_DTYPE_BFLOAT16 || d == BP_DTYPE_FLOAT32 ||
         d == BP_DTYPE_FLOAT64;
}

// A temporary device buffer of this call, released when the commands
// enqueued so far that use it are done (OpenCL keeps it until then).
struct Scratch {
  cl_mem mem = nullptr;
  Scratch(int32_t index, std::size_t bytes) {
    cl_int err = CL_SUCCESS;
    mem = clCreateBuffer(device(index).context, CL_MEM_READ_WRITE, std::max<std::size_t>(bytes, 1),
                         nullptr, &err);
    BP_CL_CHECK(err);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { clReleaseMemObject(mem); }
};

// The walk over the lines along `dim`: in's shape with that dim at size 1,
// operands out and in (a 0-d input is one line of one element).
Geo lines_of(const TensorRef& out, const TensorRef& in, int dim) {
  std::vector<int64_t> shape(in.shape(), in.shape() + in.ndim());
  if (in.ndim() > 0) shape[static_cast<std::size_t>(dim)] = 1;
  return plain(in.ndim(), shape.data(), {out.strides(), in.strides()}, {esize(out), esize(in)},
               {offset(out), offset(in)});
}

void argsort(const KernelCall& c) {
  OpScope scope("argsort");
  bool descending = false;
  const int dim = bp::sdk::check::argsort(c, &descending);
  const TensorRef in = c.input(0), out = c.output(0);
  const bp_dtype t = in.dtype();
  check_dtype(c.device(), t);
  if (in.numel() == 0) return;
  Stream& s = resolve(c.device(), c.stream());
  const Geo outer = lines_of(out, in, dim);
  const cl_long n = size_at(in, dim), total = outer.n * n;
  const cl_long x_dim_stride = stride_at(in, dim) * esize(in);
  const cl_long o_dim_stride = stride_at(out, dim) * esize(out);
  // Keys as T_C: float for the 16-bit floats and int for bool, so at most
  // max(size, 4) bytes each.
  const std::size_t key_bytes = std::max<std::size_t>(bp::sdk::dtype_size(t), 4);
  const std::size_t count = static_cast<std::size_t>(total);
  Scratch keys0(c.device(), count * key_bytes), keys1(c.device(), count * key_bytes);
  Scratch idx0(c.device(), count * 8), idx1(c.device(), count * 8);
  const ProgramSpec spec{"sort", {{"T", t}}, "#define ARGSORT 1\n"};
  cl_kernel load = kernel(c.device(), spec, "argsort_load");
  Args(load).mem(keys0.mem).mem(idx0.mem).mem(in.raw().data) << outer << n << x_dim_stride;
  launch(s, load, count);
  // Runs of width w merged in pairs until one run holds each line.
  cl_mem k_from = keys0.mem, k_to = keys1.mem, i_from = idx0.mem, i_to = idx1.mem;
  const cl_int desc = descending ? 1 : 0;
  cl_kernel merge = kernel(c.device(), spec, "argsort_merge");
  for (cl_long w = 1; w < n; w *= 2) {
    Args(merge).mem(k_to).mem(i_to).mem(k_from).mem(i_from) << total << n << w << desc;
    launch(s, merge, count);
    std::swap(k_from, k_to);
    std::swap(i_from, i_to);
  }
  cl_kernel store = kernel(c.device(), spec, "argsort_store");
  Args(store).mem(out.raw().data).mem(i_from) << outer << n << o_dim_stride;
  launch(s, store, count);
}

// How many chunks each line's running sum is split into (1: one work-item
// per line is enough): a few thousand work-items in all, each chunk at
// least 2K elements.
int64_t chunks_of(int64_t lines, int64_t n) {
  constexpr int64_t kChunk = int64_t{1} << 11, kItems = 4096;
  if (lines >= kItems / 4 || n < 2 * kChunk) return 1;
  return std::max<int64_t>(1, std::min(n / kChunk, kItems / lines));
}

void cumsum(const KernelCall& c) {
  OpScope scope("cumsum");
  const int dim = bp::sdk::check::cumsum(c);
  const TensorRef in = c.input(0), out = c.output(0);
  const bp_dtype t = in.dtype();
  check_dtype(c.device(), t);
  if (in.numel() == 0) return;
  Stream& s = resolve(c.device(), c.stream());
  const bp_dtype acc = floating(t) ? (device(c.device()).fp64 ? BP_DTYPE_FLOAT64 : BP_DTYPE_FLOAT32)
                                   : BP_DTYPE_INT64;
  const ProgramSpec spec{"sort", {{"T", t}, {"O", out.dtype()}, {"A", acc}}, "#define CUMSUM 1\n"};
  const Geo outer = lines_of(out, in, dim);
  const cl_long n = size_at(in, dim), lines = outer.n;
  const cl_long x_dim_stride = stride_at(in, dim) * esize(in);
  const cl_long o_dim_stride = stride_at(out, dim) * esize(out);
  const cl_long chunks = chunks_of(lines, n);
  const std::size_t items = static_cast<std::size_t>(lines * chunks);
  cl_kernel scan = kernel(c.device(), spec, "cumsum_scan");
  if (chunks == 1) {
    // No parts: `part` is never read, any buffer will do.
    const cl_int has_part = 0;
    Args(scan).mem(out.raw().data).mem(in.raw().data).mem(in.raw().data)
        << outer << n << chunks << x_dim_stride << o_dim_stride << has_part;
    launch(s, scan, items);
    return;
  }
  Scratch part(c.device(), items * bp::sdk::dtype_size(acc));
  cl_kernel sums = kernel(c.device(), spec, "cumsum_part");
  Args(sums).mem(part.mem).mem(in.raw().data) << outer << n << chunks << x_dim_stride;
  launch(s, sums, items);
  cl_kernel offsets = kernel(c.device(), spec, "cumsum_offsets");
  Args(offsets).mem(part.mem) << lines << chunks;
  launch(s, offsets, static_cast<std::size_t>(lines));
  const cl_int has_part = 1;
  Args(scan).mem(out.raw().data).mem(in.raw().data).mem(part.mem)
      << outer << n << chunks << x_dim_stride << o_dim_stride << has_part;
  launch(s, scan, items);
}

}  // namespace

void register_sort_kernels(Registrar& r) {
  // ARGMAX's dtypes for argsort, SUM's for cumsum (bool and integers sum
  // into int64).
  add_kernel<argsort>(r, BP_OP_ARGSORT, kAll);
  add_kernel<cumsum>(r, BP_OP_CUMSUM, kAll);
}

}  // namespace bp::opencl
