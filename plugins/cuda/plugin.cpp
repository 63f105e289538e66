// Entry point of the cuda plugin: device memory behind the caching
// allocator, one stream per device, and the kernel families, each registered
// by its own file. Creating the plugin touches no CUDA API: the runtime starts
// on the first device query, so loading works on a machine without a driver.
#include "cuda_backend.h"

namespace bp::cuda {

namespace {
thread_local const char* t_current_op = "cuda";

}  // namespace

const char* current_op() {
  return t_current_op;
}

const char* op_name(int op) {
  return bp::sdk::op_name(op);
}

OpScope::OpScope(const char* name) : previous_(t_current_op) {
  t_current_op = name;
}
OpScope::~OpScope() {
  t_current_op = previous_;
}

void throw_cuda_error(const char* call, cudaError_t err) {
  // The SDK maps bad_alloc to BP_STATUS_OUT_OF_MEMORY, which callers may act on.
  if (err == cudaErrorMemoryAllocation) throw std::bad_alloc();
  std::ostringstream os;
  os << "[" << current_op() << "] " << call << " failed: " << cudaGetErrorName(err) << ": "
     << cudaGetErrorString(err);
  throw std::runtime_error(os.str());
}

class CudaPlugin final : public bp::sdk::Plugin {
 public:
  CudaPlugin() { hold_allocator(); }
  ~CudaPlugin() override {
    try {
      OpScope scope("destroy");
      release_allocator();
    } catch (...) {
      // The driver may already be shutting down at process exit; the memory
      // goes with the process either way.
    }
  }

  const char* name() const override { return "cuda"; }
  const char* version() const override { return "0.1.0"; }
  int32_t dl_device_type() const override { return 2; /* kDLCUDA */ }

  int32_t device_count(std::string& reason) const override {
    return bp::cuda::device_count(reason);
  }
  void device_props(int32_t device, bp_device_props& props) const override {
    OpScope scope("device_props");
    fill_device_props(device, props);
  }

  void register_kernels(Registrar& r) override {
    register_copy_kernels(r);
    register_unary_kernels(r);
    register_binary_kernels(r);
    register_reduce_kernels(r);
    register_softmax_kernels(r);
    register_matmul_kernels(r);
    register_index_kernels(r);
    register_random_kernels(r);
  }

  void* allocate(int32_t device, std::size_t nbytes, std::size_t alignment) override {
    OpScope scope("allocate");
    return bp::cuda::allocate(device, nbytes, alignment);
  }
  void deallocate(int32_t device, void* ptr, std::size_t nbytes) override {
    OpScope scope("deallocate");
    bp::cuda::deallocate(device, ptr, nbytes);
  }
  void copy_from_host(int32_t device, void* dst, const void* src, std::size_t n) override {
    OpScope scope("copy_from_host");
    bp::cuda::copy_from_host(device, dst, src, n);
  }
  void copy_to_host(int32_t device, void* dst, const void* src, std::size_t n) override {
    OpScope scope("copy_to_host");
    bp::cuda::copy_to_host(device, dst, src, n);
  }
  void copy_on_device(int32_t dst_device, void* dst, int32_t src_device, const void* src,
                      std::size_t n) override {
    OpScope scope("copy_on_device");
    bp::cuda::copy_on_device(dst_device, dst, src_device, src, n);
  }
  void memset(int32_t device, void* dst, int32_t value, std::size_t n) override {
    OpScope scope("memset");
    memset_device(device, dst, value, n);
  }
  void synchronize(int32_t device) override {
    OpScope scope("synchronize");
    bp::cuda::synchronize(device);
  }
  void memory_stats(int32_t device, bp_memory_stats& stats) override {
    OpScope scope("memory_stats");
    bp::cuda::memory_stats(device, stats);
  }
};

}  // namespace bp::cuda

BP_SDK_PLUGIN(bp::cuda::CudaPlugin)
