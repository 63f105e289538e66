// The FILL and COPY kernels, on the call's stream. (The byte copies and
// memset of the plugin table are in plugin.cpp.)
#include "elementwise.cuh"

namespace bp::cuda {

namespace {

template <class To, class From>
struct Convert {
  __device__ To operator()(From x) const {
    if constexpr (std::is_same_v<To, bool>)
      return x != From(0);
    else
      return static_cast<To>(x);
  }
};

template <class T>
struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

template <class T>
void fill_typed(cudaStream_t s, const TensorRef& out, T value) {
  const int64_t n = out.numel();
  if (n == 0) return;
  // All-zero bytes (zero_(), zeros()) on a dense tensor is a memset.
  bool zero_bytes = true;
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&value);
  for (std::size_t i = 0; i < sizeof(T); ++i) zero_bytes = zero_bytes && bytes[i] == 0;
  if (zero_bytes && is_dense(out)) {
    BP_CUDA_CHECK(cudaMemsetAsync(out.base(), 0, n * sizeof(T), s));
    return;
  }
  launch_elementwise<T>(s, out, {nullptr, nullptr, nullptr}, Constant<T>{value});
}

void fill_kernel(const KernelCall& c) {
  check::fill(c);
  const TensorRef out = c.output(0);
  const cudaStream_t s = prepare(c).handle;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_typed<T>(s, out, bp::sdk::scalar_as<T>(c.scalar(0)));
  });
}

template <class To, class From>
void copy_typed(cudaStream_t s, const TensorRef& out, const TensorRef& in) {
  const int64_t n = out.numel();
  if (n == 0) return;
  if constexpr (std::is_same_v<To, From>) {
    if (same_strides(out, in)) {
      if (out.base() == in.base()) return;
      if (is_dense(out)) {
        BP_CUDA_CHECK(
            cudaMemcpyAsync(out.base(), in.base(), n * sizeof(To), cudaMemcpyDeviceToDevice, s));
        return;
      }
    }
  }
  launch_elementwise<To, From>(s, out, {&in.raw(), nullptr, nullptr}, Convert<To, From>{});
}

void copy_kernel(const KernelCall& c) {
  check::copy(c);
  copy_tensor(prepare(c).handle, c.output(0).raw(), c.input(0).raw());
}

}  // namespace

void copy_tensor(cudaStream_t s, const bp_tensor& out_t, const bp_tensor& in_t) {
  const TensorRef out(out_t), in(in_t);
  check_same_shape(in, out, "the input");
  bp::sdk::visit_dtype(in.dtype(), [&](auto from) {
    bp::sdk::visit_dtype(out.dtype(),
                         [&](auto to) { copy_typed<decltype(to), decltype(from)>(s, out, in); });
  });
}

void fill_zero(cudaStream_t s, const bp_tensor& out_t) {
  const TensorRef out(out_t);
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_typed<T>(s, out, T(0));
  });
}

void register_copy_kernels(Registrar& r) {
  add_kernel<&fill_kernel>(r, BP_OP_FILL, kBaseDtypes, BP_ORIGIN);
  add_kernel<&copy_kernel>(r, BP_OP_COPY, kBaseDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
