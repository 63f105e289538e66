// Byte copies between host and device, memset, and the FILL and COPY
// kernels. Everything is queued on the device's stream; only a copy to the
// host waits, because the caller reads the bytes as soon as it returns.
#include "elementwise.cuh"

namespace bp::cuda {

void copy_from_host(int device, void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  check_device(device);
  set_device(device);
  // From pageable memory the call returns once the bytes are staged, so the
  // caller may reuse `src` at once; the transfer itself stays asynchronous.
  BP_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream(device)));
}

void copy_to_host(int device, void* dst, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  check_device(device);
  set_device(device);
  const cudaStream_t s = stream(device);
  BP_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s));
  BP_CUDA_CHECK(cudaStreamSynchronize(s));
}

void copy_on_device(int dst_device, void* dst, int src_device, const void* src,
                    std::size_t nbytes) {
  if (nbytes == 0) return;
  check_device(dst_device);
  check_device(src_device);
  if (dst_device == src_device) {
    set_device(dst_device);
    BP_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream(dst_device)));
    return;
  }
  // Two streams: the copy runs on the source's after the destination's
  // pending work, and the destination's later work waits for the copy, so
  // neither allocator pool can recycle a block the copy still uses.
  const cudaStream_t ss = stream(src_device), ds = stream(dst_device);
  cudaEvent_t dst_ready = nullptr, copied = nullptr;
  set_device(dst_device);
  BP_CUDA_CHECK(cudaEventCreateWithFlags(&dst_ready, cudaEventDisableTiming));
  BP_CUDA_CHECK(cudaEventRecord(dst_ready, ds));
  set_device(src_device);
  BP_CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  BP_CUDA_CHECK(cudaStreamWaitEvent(ss, dst_ready, 0));
  BP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, ss));
  BP_CUDA_CHECK(cudaEventRecord(copied, ss));
  set_device(dst_device);
  BP_CUDA_CHECK(cudaStreamWaitEvent(ds, copied, 0));
  // Destroying a recorded event is allowed: the runtime frees it once it completes.
  BP_CUDA_CHECK(cudaEventDestroy(dst_ready));
  BP_CUDA_CHECK(cudaEventDestroy(copied));
}

void memset_device(int device, void* dst, int value, std::size_t nbytes) {
  if (nbytes == 0) return;
  check_device(device);
  set_device(device);
  BP_CUDA_CHECK(cudaMemsetAsync(dst, value, nbytes, stream(device)));
}

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
  const cudaStream_t s = prepare(out);
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
  copy_tensor(prepare(c.output(0)), c.output(0).raw(), c.input(0).raw());
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
  add_kernel<&fill_kernel>(r, BP_OP_FILL, kAllDtypes, BP_ORIGIN);
  add_kernel<&copy_kernel>(r, BP_OP_COPY, kAllDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
