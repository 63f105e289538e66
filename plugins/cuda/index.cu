// GATHER, SCATTER, INDEX_SELECT on the pointer form of the elementwise
// engine: the indexed operand joins the walk with stride 0 along the dim, and
// the functor adds index * that dim's stride. Gathers move elements by size
// (1, 4 or 8 bytes), so three instantiations serve every dtype.
//
// SCATTER gives each thread one whole line along the dim and walks it in
// order: two index positions write the same element only if they share a
// line, so the last write wins and an add counts every duplicate, as in the
// reference's sequential loop, with no atomics.
//
// Indices are validated on the device and nothing waits for the check: an
// index out of range goes to the stream's error record, and the next
// synchronisation of the stream reports it ("[gather] index 7 is out of
// range for dimension 0 of size 3 (found on the device)"). GATHER and
// INDEX_SELECT check in the kernel that moves the data (a bad index writes
// zero, never reads outside the source). SCATTER writes into `self`, which
// must stay unchanged when it fails: a first kernel checks every index and
// sets the call's flag, and the scatter kernel does nothing when it is set.
#include "elementwise.cuh"

namespace bp::cuda {

namespace {

// Where a bad index is recorded: the stream's record, what the message
// names, and the range [0, limit) an index must fall in.
struct IndexErrors {
  ErrorRecord* errors;
  int32_t op;
  int32_t dim;
  int64_t limit;
  __device__ bool bad(int64_t i) const {
    if (i >= 0 && i < limit) return false;
    record_error(errors, kIndexOutOfRange, op, i, limit, dim);
    return true;
  }
};

struct IndexCheck {
  IndexErrors check;
  int32_t* failed;
  __device__ void operator()(char* (&p)[1]) const {
    if (check.bad(*reinterpret_cast<const int64_t*>(p[0]))) *failed = 1;
  }
};

// Operands: out, index, source (stride 0 along the dim).
template <class E>
struct GatherFn {
  int64_t step;  // bytes between source elements along the dim
  IndexErrors check;
  __device__ void operator()(char* (&p)[3]) const {
    const int64_t i = *reinterpret_cast<const int64_t*>(p[1]);
    *reinterpret_cast<E*>(p[0]) =
        check.bad(i) ? E(0) : *reinterpret_cast<const E*>(p[2] + i * step);
  }
};

// Operands: index, source, self (stride 0 along the dim), each at the start
// of one line of `n` elements along the dim (byte steps given).
template <class T>
struct ScatterLineFn {
  int64_t n, index_step, src_step, self_step;
  bool add;
  const int32_t* failed;  // set by the IndexCheck of the same call
  __device__ void operator()(char* (&p)[3]) const {
    if (*failed) return;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = *reinterpret_cast<const int64_t*>(p[0] + k * index_step);
      const T v = *reinterpret_cast<const T*>(p[1] + k * src_step);
      T* dst = reinterpret_cast<T*>(p[2] + i * self_step);
      *dst = add ? fn::combine<fn::Reduction::sum>(*dst, v) : v;  // bool: or
    }
  }
};

template <class F>
void visit_element_size(bp_dtype d, F&& f) {
  switch (bp::sdk::dtype_size(d)) {
    case 1:
      return f(uint8_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

// Checks every element of `index` (int64, any layout) against [0, limit) on
// the device; sets `failed` on a bad one.
void check_indices(cudaStream_t s, const TensorRef& index, const IndexErrors& check,
                   int32_t* failed) {
  launch_strided<1>(s, index.ndim(), index.shape(), {static_cast<char*>(index.base())},
                    {index.strides()}, {8}, IndexCheck{check, failed});
}

// `t`'s strides with the one along `dim` zeroed (when t has dims at all).
std::array<int64_t, BP_MAX_DIMS> without_dim(const TensorRef& t, int dim) {
  std::array<int64_t, BP_MAX_DIMS> s{};
  for (int d = 0; d < t.ndim(); ++d) s[d] = d == dim ? 0 : t.stride(d);
  return s;
}

void gather_kernel(const KernelCall& c) {
  const int dim = check::gather(c);
  const TensorRef src = c.input(0), index = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  if (out.numel() == 0) return;
  Stream& st = prepare(c);
  const cudaStream_t s = st.handle;
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(out.dtype()));
  const IndexErrors check{st.errors, BP_OP_GATHER, dim, nd == 0 ? 1 : src.size(dim)};
  const auto src_strides = without_dim(src, dim);
  const int64_t step = nd == 0 ? 0 : src.stride(dim) * esize;
  visit_element_size(out.dtype(), [&](auto tag) {
    using E = decltype(tag);
    launch_strided<3>(s, nd, out.shape(),
                      {static_cast<char*>(out.base()), static_cast<char*>(index.base()),
                       static_cast<char*>(src.base())},
                      {out.strides(), index.strides(), src_strides.data()}, {esize, 8, esize},
                      GatherFn<E>{step, check});
  });
}

void scatter_kernel(const KernelCall& c) {
  const check::ScatterArgs args = check::scatter(c);
  const int dim = args.dim;
  const int64_t reduction = args.reduction;
  const TensorRef index = c.input(0), src = c.input(1), self = c.output(0);
  const int nd = self.ndim();
  if (index.numel() == 0) return;
  Stream& st = prepare(c);
  const cudaStream_t s = st.handle;
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(self.dtype()));
  const CheckFlag failed(st);
  check_indices(s, index, IndexErrors{st.errors, BP_OP_SCATTER, dim, nd == 0 ? 1 : self.size(dim)},
                failed.get());
  // One thread per line: the walk covers the index's shape with the dim cut to 1.
  std::array<int64_t, BP_MAX_DIMS> lines{};
  for (int d = 0; d < nd; ++d) lines[d] = d == dim ? 1 : index.size(d);
  const auto self_strides = without_dim(self, dim);
  const int64_t n = nd == 0 ? 1 : index.size(dim);
  bp::sdk::visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const ScatterLineFn<T> f{n,
                             nd == 0 ? 0 : index.stride(dim) * 8,
                             nd == 0 ? 0 : src.stride(dim) * esize,
                             nd == 0 ? 0 : self.stride(dim) * esize,
                             reduction == 1,
                             failed.get()};
    launch_strided<3>(s, nd, lines.data(),
                      {static_cast<char*>(index.base()), static_cast<char*>(src.base()),
                       static_cast<char*>(self.base())},
                      {index.strides(), src.strides(), self_strides.data()}, {8, esize, esize}, f);
  });
}

void index_select_kernel(const KernelCall& c) {
  const int dim = check::index_select(c);
  const TensorRef src = c.input(0), index = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  if (out.numel() == 0) return;
  Stream& st = prepare(c);
  const cudaStream_t s = st.handle;
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(out.dtype()));
  const IndexErrors check{st.errors, BP_OP_INDEX_SELECT, dim, nd == 0 ? 1 : src.size(dim)};
  const auto src_strides = without_dim(src, dim);
  // The index walks with the output: its stride along the dim, 0 elsewhere.
  std::array<int64_t, BP_MAX_DIMS> index_strides{};
  if (nd > 0 && index.ndim() == 1) index_strides[dim] = index.stride(0);
  // Reuses the gather functor: operands out, index, source.
  visit_element_size(out.dtype(), [&](auto tag) {
    using E = decltype(tag);
    launch_strided<3>(s, nd, out.shape(),
                      {static_cast<char*>(out.base()), static_cast<char*>(index.base()),
                       static_cast<char*>(src.base())},
                      {out.strides(), index_strides.data(), src_strides.data()}, {esize, 8, esize},
                      GatherFn<E>{nd == 0 ? 0 : src.stride(dim) * esize, check});
  });
}

}  // namespace

void register_index_kernels(Registrar& r) {
  add_kernel<&gather_kernel>(r, BP_OP_GATHER, kBaseDtypes, BP_ORIGIN);
  add_kernel<&scatter_kernel>(r, BP_OP_SCATTER, kBaseDtypes, BP_ORIGIN);
  add_kernel<&index_select_kernel>(r, BP_OP_INDEX_SELECT, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
