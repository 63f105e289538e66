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
// Indices are validated by a first kernel whose flag is copied back before
// anything is written (one stream sync per call): an out-of-range index is an
// error, and a failed scatter leaves `self` unchanged.
#include "elementwise.cuh"

namespace bp::cuda {

namespace {

struct IndexCheck {
  int64_t limit;
  DeviceError* error;
  __device__ void operator()(char* (&p)[1]) const {
    const int64_t v = *reinterpret_cast<const int64_t*>(p[0]);
    if (v < 0 || v >= limit) raise_error(error, v);
  }
};

// Operands: out, index, source (stride 0 along the dim).
template <class E>
struct GatherFn {
  int64_t step;  // bytes between source elements along the dim
  __device__ void operator()(char* (&p)[3]) const {
    const int64_t i = *reinterpret_cast<const int64_t*>(p[1]);
    *reinterpret_cast<E*>(p[0]) = *reinterpret_cast<const E*>(p[2] + i * step);
  }
};

// Operands: index, source, self (stride 0 along the dim), each at the start
// of one line of `n` elements along the dim (byte steps given).
template <class T>
struct ScatterLineFn {
  int64_t n, index_step, src_step, self_step;
  bool add;
  __device__ void operator()(char* (&p)[3]) const {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = *reinterpret_cast<const int64_t*>(p[0] + k * index_step);
      const T v = *reinterpret_cast<const T*>(p[1] + k * src_step);
      T* dst = reinterpret_cast<T*>(p[2] + i * self_step);
      if (!add) {
        *dst = v;
      } else if constexpr (std::is_same_v<T, bool>) {
        *dst = *dst || v;
      } else {
        using U = Wrapping<T>;
        *dst = static_cast<T>(static_cast<U>(*dst) + static_cast<U>(v));
      }
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

// Throws unless every element of `index` (int64, any layout) is in [0, limit).
void check_indices(cudaStream_t s, const TensorRef& index, int64_t limit, int dim) {
  if (index.numel() == 0) return;
  ErrorFlag flag(index.device(), s);
  launch_strided<1>(s, index.ndim(), index.shape(), {static_cast<char*>(index.base())},
                    {index.strides()}, {8}, IndexCheck{limit, flag.get()});
  const DeviceError e = flag.read();
  BP_CHECK(!e.raised, "index " << e.culprit() << " is out of range for dim " << dim << " of size "
                               << limit << " (valid range: [0, " << limit << "))");
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
  const cudaStream_t s = prepare(out);
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(out.dtype()));
  check_indices(s, index, nd == 0 ? 1 : src.size(dim), dim);
  const auto src_strides = without_dim(src, dim);
  const int64_t step = nd == 0 ? 0 : src.stride(dim) * esize;
  visit_element_size(out.dtype(), [&](auto tag) {
    using E = decltype(tag);
    launch_strided<3>(s, nd, out.shape(),
                      {static_cast<char*>(out.base()), static_cast<char*>(index.base()),
                       static_cast<char*>(src.base())},
                      {out.strides(), index.strides(), src_strides.data()}, {esize, 8, esize},
                      GatherFn<E>{step});
  });
}

void scatter_kernel(const KernelCall& c) {
  const check::ScatterArgs args = check::scatter(c);
  const int dim = args.dim;
  const int64_t reduction = args.reduction;
  const TensorRef index = c.input(0), src = c.input(1), self = c.output(0);
  const int nd = self.ndim();
  if (index.numel() == 0) return;
  const cudaStream_t s = prepare(self);
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(self.dtype()));
  check_indices(s, index, nd == 0 ? 1 : self.size(dim), dim);
  // One thread per line: the walk covers the index's shape with the dim cut to 1.
  std::array<int64_t, BP_MAX_DIMS> lines{};
  for (int d = 0; d < nd; ++d) lines[d] = d == dim ? 1 : index.size(d);
  const auto self_strides = without_dim(self, dim);
  const int64_t n = nd == 0 ? 1 : index.size(dim);
  bp::sdk::visit_dtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const ScatterLineFn<T> f{n, nd == 0 ? 0 : index.stride(dim) * 8,
                             nd == 0 ? 0 : src.stride(dim) * esize,
                             nd == 0 ? 0 : self.stride(dim) * esize, reduction == 1};
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
  const cudaStream_t s = prepare(out);
  const int64_t esize = static_cast<int64_t>(bp::sdk::dtype_size(out.dtype()));
  check_indices(s, index, nd == 0 ? 1 : src.size(dim), dim);
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
                      GatherFn<E>{nd == 0 ? 0 : src.stride(dim) * esize});
  });
}

}  // namespace

void register_index_kernels(Registrar& r) {
  add_kernel<&gather_kernel>(r, BP_OP_GATHER, kAllDtypes, BP_ORIGIN);
  add_kernel<&scatter_kernel>(r, BP_OP_SCATTER, kAllDtypes, BP_ORIGIN);
  add_kernel<&index_select_kernel>(r, BP_OP_INDEX_SELECT, kAllDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
