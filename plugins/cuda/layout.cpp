// Layout predicates and the small helpers every kernel family uses.
#include "cuda_backend.h"

namespace bp::cuda {

void check_same_shape(const TensorRef& t, const TensorRef& out, const char* what) {
  BP_CHECK(t.ndim() == out.ndim(),
           what << " has rank " << t.ndim() << ", the output " << out.ndim());
  for (int d = 0; d < out.ndim(); ++d)
    BP_CHECK(t.size(d) == out.size(d), what << " has size " << t.size(d) << " in dim " << d
                                            << ", the output " << out.size(d));
}

ErrorFlag::ErrorFlag(int device, cudaStream_t stream)
    : stream_(stream), scratch_(device, sizeof(DeviceError)) {
  BP_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, sizeof(DeviceError), stream_));
}

DeviceError ErrorFlag::read() const {
  DeviceError e{};
  BP_CUDA_CHECK(cudaMemcpyAsync(&e, scratch_.get(), sizeof e, cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return e;
}

}  // namespace bp::cuda
