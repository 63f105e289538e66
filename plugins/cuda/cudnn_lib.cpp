// cuDNN loading, handles and descriptors (cudnn_lib.h).
#include "cudnn_lib.h"

#include <dlfcn.h>

#include <array>

namespace bp::cuda {

const Cudnn& cudnn() {
  static const Cudnn* lib = [] {
    auto* c = new Cudnn();  // never unloaded: handles live until exit
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("/usr/local/cuda/lib64/libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      c->missing = std::string("cuDNN 9 not found (") + (e ? e : "dlopen failed") + ")";
      return c;
    }
#define BP_CUDNN_LOAD(name)                                       \
  c->name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name)); \
  if (c->name == nullptr && c->missing.empty()) c->missing = "cuDNN lacks " #name;
    BP_CUDNN_FUNCTIONS(BP_CUDNN_LOAD)
#undef BP_CUDNN_LOAD
    return c;
  }();
  return *lib;
}

void require_cudnn() {
  if (!cudnn().missing.empty()) BP_SDK_UNSUPPORTED(cudnn().missing << "; the composite runs");
}

cudnnHandle_t handle_for(const Stream& s) {
  thread_local std::array<cudnnHandle_t, kMaxDevices> handles{};
  cudnnHandle_t& h = handles[static_cast<std::size_t>(s.device)];
  if (h == nullptr) BP_CUDNN_TRY(cudnn().cudnnCreate(&h));
  BP_CUDNN_TRY(cudnn().cudnnSetStream(h, s.handle));
  return h;
}

int as_int(int64_t v) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    BP_SDK_UNSUPPORTED("a size or stride of " << v << " does not fit cuDNN's int");
  return static_cast<int>(v);
}

cudnnDataType_t data_type(bp_dtype d) {
  if (d == BP_DTYPE_FLOAT32) return CUDNN_DATA_FLOAT;
  if (d == BP_DTYPE_FLOAT64) return CUDNN_DATA_DOUBLE;
  BP_SDK_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(d));
}

TensorDesc::TensorDesc(cudnnDataType_t type, const int64_t (&dims)[4],
                       const int64_t (&strides)[4]) {
  BP_CUDNN_TRY(cudnn().cudnnCreateTensorDescriptor(&d));
  try {
    BP_CUDNN_TRY(cudnn().cudnnSetTensor4dDescriptorEx(
        d, type, as_int(dims[0]), as_int(dims[1]), as_int(dims[2]), as_int(dims[3]),
        as_int(strides[0]), as_int(strides[1]), as_int(strides[2]), as_int(strides[3])));
  } catch (...) {
    cudnn().cudnnDestroyTensorDescriptor(d);
    throw;
  }
}

}  // namespace bp::cuda
