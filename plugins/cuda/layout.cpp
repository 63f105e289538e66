// Layout predicates and the small helpers every kernel family uses.
#include "cuda_backend.h"

namespace bp::cuda {

void check_same_shape(const TensorRef& t, const TensorRef& out, const char* what) {
  BP_SDK_REQUIRE(t.ndim() == out.ndim(),
                 what << " has rank " << t.ndim() << ", the output " << out.ndim());
  for (int d = 0; d < out.ndim(); ++d)
    BP_SDK_REQUIRE(t.size(d) == out.size(d), what << " has size " << t.size(d) << " in dim " << d
                                                  << ", the output " << out.size(d));
}

CheckFlag::CheckFlag(const Stream& s) : scratch_(s, sizeof(int32_t)) {
  // Stream-ordered like the kernels that use it: no host wait.
  BP_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, sizeof(int32_t), s.handle));
}

}  // namespace bp::cuda
