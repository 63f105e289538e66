// gather, scatter (none / add) and index_select: kernels/index.cl. An index
// out of range is found on the device, recorded in the stream's error
// record and reported at the next synchronisation (stream.cpp).
#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

// `t`'s strides with the one along `dim` zeroed.
std::vector<int64_t> without(const TensorRef& t, int dim) {
  std::vector<int64_t> s(t.strides(), t.strides() + t.ndim());
  if (t.ndim() > 0) s[static_cast<std::size_t>(dim)] = 0;
  return s;
}

ProgramSpec spec_for(bp_dtype t) { return ProgramSpec{"index", {{"T", t}}, {}}; }

void gather(const KernelCall& c) {
  OpScope scope("gather");
  check_dtype(c.device(), c.dtype());
  const TensorRef x = c.input(0), index = c.input(1), out = c.output(0);
  const int dim = dim_attr(c, x.ndim());
  if (out.numel() == 0) return;
  const std::vector<int64_t> xs = without(x, dim);
  const Geo g = plain(out.ndim(), out.shape(), {out.strides(), index.strides(), xs.data()},
                      {esize(out), 8, esize(x)}, {offset(out), offset(index), offset(x)});
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "gather");
  const cl_long dim_size = size_at(x, dim), x_dim_stride = stride_at(x, dim) * esize(x);
  const cl_int op = BP_OP_GATHER, d = dim;
  Args(k).mem(out.raw().data).mem(x.raw().data).mem(index.raw().data)
      << g << dim_size << x_dim_stride << op << d << s.errors;
  launch(s, k, static_cast<std::size_t>(g.n));
}

void index_select(const KernelCall& c) {
  OpScope scope("index_select");
  check_dtype(c.device(), c.dtype());
  const TensorRef x = c.input(0), index = c.input(1), out = c.output(0);
  const int dim = dim_attr(c, x.ndim());
  if (out.numel() == 0) return;
  const std::vector<int64_t> xs = without(x, dim);
  const Geo g = plain(out.ndim(), out.shape(), {out.strides(), xs.data()}, {esize(out), esize(x)},
                      {offset(out), offset(x)});
  Stream& s = resolve(c.device(), c.stream());
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "index_select");
  const cl_long sdim = out.ndim() == 0 ? 0 : out.ndim() - 1 - dim;
  const cl_long index_stride = (index.ndim() == 0 ? 0 : index.stride(0)) * 8;
  const cl_long index_offset = offset(index);
  const cl_long dim_size = size_at(x, dim), x_dim_stride = stride_at(x, dim) * esize(x);
  const cl_int op = BP_OP_INDEX_SELECT, d = dim;
  Args(k).mem(out.raw().data).mem(x.raw().data).mem(index.raw().data)
      << g << sdim << index_stride << index_offset << dim_size << x_dim_stride << op << d
      << s.errors;
  launch(s, k, static_cast<std::size_t>(g.n));
}

void scatter(const KernelCall& c) {
  OpScope scope("scatter");
  check_dtype(c.device(), c.dtype());
  const TensorRef index = c.input(0), src = c.input(1), out = c.output(0);
  const int dim = dim_attr(c, out.ndim());
  const cl_long reduce = c.attrs().num_ints > 1 ? c.attrs().ints[1] : 0;
  BP_SDK_REQUIRE(reduce == 0 || reduce == 1,
                 "reduction " << reduce << " is neither 0 (none) nor 1 (add)");
  if (index.numel() == 0) return;
  std::vector<int64_t> shape(index.shape(), index.shape() + index.ndim());
  if (index.ndim() > 0) shape[static_cast<std::size_t>(dim)] = 1;
  const Geo g = plain(index.ndim(), shape.data(), {out.strides(), index.strides(), src.strides()},
                      {esize(out), 8, esize(src)}, {offset(out), offset(index), offset(src)});
  Stream& s = resolve(c.device(), c.stream());
  // The indices are checked first, into a flag of this call's own.
  cl_int err = CL_SUCCESS;
  cl_mem flag =
      clCreateBuffer(device(c.device()).context, CL_MEM_READ_WRITE, sizeof(cl_int), nullptr, &err);
  BP_CL_CHECK(err);
  struct Release {
    cl_mem m;
    ~Release() { clReleaseMemObject(m); }
  } release{flag};
  const cl_int zero = 0;
  BP_CL_CHECK(
      clEnqueueFillBuffer(s.queue, flag, &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr));
  ++s.submitted;
  const Geo all = plain(index.ndim(), index.shape(), {index.strides()}, {8}, {offset(index)});
  cl_kernel check = kernel(c.device(), spec_for(c.dtype()), "check_index");
  const cl_long out_dim_size = size_at(out, dim);
  const cl_int check_op = BP_OP_SCATTER, check_dim = dim;
  Args(check).mem(index.raw().data)
      << all << out_dim_size << check_op << check_dim << s.errors << flag;
  launch(s, check, static_cast<std::size_t>(all.n));
  cl_kernel k = kernel(c.device(), spec_for(c.dtype()), "scatter_");
  const cl_long count = size_at(index, dim);
  const cl_long o_dim_stride = stride_at(out, dim) * esize(out);
  const cl_long index_dim_stride = stride_at(index, dim) * 8;
  const cl_long src_dim_stride = stride_at(src, dim) * esize(src);
  const cl_long dim_size = size_at(out, dim);
  const cl_int op = BP_OP_SCATTER, d = dim;
  Args(k).mem(out.raw().data).mem(index.raw().data).mem(src.raw().data)
      << g << count << o_dim_stride << index_dim_stride << src_dim_stride << dim_size << reduce
      << op << d << s.errors << flag;
  launch(s, k, static_cast<std::size_t>(g.n));
}

}  // namespace

void register_index_kernels(Registrar& r) {
  add_kernel<gather>(r, BP_OP_GATHER, kAll);
  add_kernel<scatter>(r, BP_OP_SCATTER, kAll);
  add_kernel<index_select>(r, BP_OP_INDEX_SELECT, kAll);
}

}  // namespace bp::opencl
