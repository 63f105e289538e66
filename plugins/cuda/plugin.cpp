// Entry point of the cuda plugin: device memory behind the caching
// allocator, streams and events (real cudaStream_t / cudaEvent_t), and the
// kernel families, each registered by its own file. Every kernel, copy and
// memset is enqueued on the stream it is given and nothing waits for the
// device except the synchronisations (see stream.cpp, errors.cu). Creating
// the plugin touches no CUDA API: the runtime starts on the first device
// query, so loading works on a machine without a driver.
#include "cuda_backend.h"

namespace bp::cuda {

const char* op_name(int op) { return bp::sdk::op_name(op); }

void throw_cuda_error(const char* call, cudaError_t err) {
  // The SDK maps bad_alloc to BP_STATUS_OUT_OF_MEMORY, which callers may act on.
  if (err == cudaErrorMemoryAllocation) throw std::bad_alloc();
  std::ostringstream os;
  os << "[" << current_op() << "] " << call << " failed: " << cudaGetErrorName(err) << ": "
     << cudaGetErrorString(err);
  throw std::runtime_error(os.str());
}

void throw_sync_error(const char* call, cudaError_t err) {
  std::ostringstream os;
  os << "[" << current_op() << "] " << call << " failed: " << cudaGetErrorName(err) << ": "
     << cudaGetErrorString(err) << " (work enqueued earlier failed on the device)";
  throw bp::sdk::DeviceError(os.str());
}

class CudaPlugin final : public bp::sdk::Plugin {
 public:
  CudaPlugin() {
    bp::sdk::set_default_op("cuda");
    hold_allocator();
  }
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
    register_conv_kernels(r);
    register_pool_norm_kernels(r);
    register_sort_kernels(r);
  }

  // Memory. Handles are device pointers; offsets are added here.
  void* allocate(int32_t device, bp_stream stream, std::size_t nbytes,
                 std::size_t alignment) override {
    OpScope scope("allocate");
    return bp::cuda::allocate(resolve(device, stream), nbytes, alignment);
  }
  void deallocate(int32_t device, bp_stream stream, void* mem, std::size_t nbytes) override {
    OpScope scope("deallocate");
    // The block remembers its size class and the stream it was allocated
    // for, which is `stream` (plugin.h): it goes back to that stream's pool.
    (void)device;
    (void)stream;
    (void)nbytes;
    bp::cuda::deallocate(mem);
  }
  void copy_from_host(int32_t device, bp_stream stream, void* mem, uint64_t offset,
                      const void* host, std::size_t n) override {
    OpScope scope("copy_from_host");
    if (n == 0) return;
    Stream& s = resolve(device, stream);
    set_device(device);
    // The core reuses `host` as soon as this returns. From pageable memory
    // (what the core passes) cudaMemcpyAsync has read the source when it
    // returns: it copies synchronously or stages the bytes into a pinned
    // buffer of the driver; the transfer itself stays in stream order. From
    // page-locked or managed memory (registered by another library in the
    // process) it would read the source later, so then this waits for it.
    // From the plugin's own page-locked buffers (host_alloc) the copy is
    // asynchronous: the core leaves the buffer alone until an event
    // recorded after it is reached (ABI 2.0).
    if (staging_.contains(host, n)) {
      BP_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(mem) + offset, host, n,
                                    cudaMemcpyHostToDevice, s.handle));
      return;
    }
    cudaPointerAttributes attrs{};
    bool deferred_read = false;
    if (cudaPointerGetAttributes(&attrs, host) == cudaSuccess)
      deferred_read = attrs.type == cudaMemoryTypeHost || attrs.type == cudaMemoryTypeManaged;
    else
      (void)cudaGetLastError();  // not a pointer the runtime knows: pageable
    BP_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(mem) + offset, host, n, cudaMemcpyHostToDevice,
                                  s.handle));
    // Waits without reading the error record: failures stay for the core's
    // own synchronisation to report.
    if (deferred_read) BP_CUDA_CHECK(cudaStreamSynchronize(s.handle));
  }
  void copy_to_host(int32_t device, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) override {
    OpScope scope("copy_to_host");
    if (n == 0) return;
    Stream& s = resolve(device, stream);
    set_device(device);
    // Enqueued only: the core synchronises the stream before it reads
    // `host`. (Into pageable memory the runtime returns once the bytes have
    // arrived anyway; into page-locked memory it returns at once.)
    BP_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const char*>(mem) + offset, n,
                                  cudaMemcpyDeviceToHost, s.handle));
  }
  void copy_on_device(bp_stream stream, int32_t dst_device, void* dst, uint64_t dst_offset,
                      int32_t src_device, const void* src, uint64_t src_offset,
                      std::size_t n) override {
    OpScope scope("copy_on_device");
    if (n == 0) return;
    Stream& s = resolve(dst_device, stream);
    set_device(dst_device);
    char* to = static_cast<char*>(dst) + dst_offset;
    const char* from = static_cast<const char*>(src) + src_offset;
    // On the destination's stream; the core has ordered the source's
    // stream before it, and keeps the source block from other streams
    // until the copy is done (as for any memory a second stream uses).
    if (src_device == dst_device) {
      BP_CUDA_CHECK(cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, s.handle));
    } else {
      check_device(src_device);
      BP_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst_device, from, src_device, n, s.handle));
    }
  }
  void memset(int32_t device, bp_stream stream, void* mem, uint64_t offset, int32_t value,
              std::size_t n) override {
    OpScope scope("memset");
    if (n == 0) return;
    Stream& s = resolve(device, stream);
    set_device(device);
    BP_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(mem) + offset, value, n, s.handle));
  }
  void* host_pointer(int32_t device, const void* mem, uint64_t offset) override {
    (void)mem;
    (void)offset;
    OpScope scope("host_pointer");
    BP_SDK_UNSUPPORTED("memory of cuda device " << device
                                                << " is not host addressable; copy it to the host");
  }

  // Streams and events (stream.cpp, event.cpp).
  bp_stream stream_create(int32_t device) override {
    OpScope scope("stream_create");
    return create_stream(device);
  }
  void stream_destroy(int32_t device, bp_stream stream) override {
    OpScope scope("stream_destroy");
    destroy_stream(device, stream);
  }
  void stream_synchronize(int32_t device, bp_stream stream) override {
    OpScope scope("stream_synchronize");
    synchronize_stream(device, stream);
  }
  bool stream_query(int32_t device, bp_stream stream) override {
    OpScope scope("stream_query");
    return query_stream(device, stream);
  }
  bp_event event_create(int32_t device) override {
    OpScope scope("event_create");
    return create_event(device);
  }
  void event_destroy(int32_t device, bp_event event) override {
    OpScope scope("event_destroy");
    destroy_event(device, event);
  }
  void event_record(int32_t device, bp_event event, bp_stream stream) override {
    OpScope scope("event_record");
    record_event(device, event, stream);
  }
  void stream_wait_event(int32_t device, bp_stream stream, bp_event event) override {
    OpScope scope("stream_wait_event");
    wait_event(device, stream, event);
  }
  bool event_query(int32_t device, bp_event event) override {
    OpScope scope("event_query");
    return query_event(device, event);
  }
  void event_synchronize(int32_t device, bp_event event) override {
    OpScope scope("event_synchronize");
    synchronize_event(device, event);
  }
  bool has_event_timing() const override { return true; }
  std::optional<double> event_elapsed(int32_t device, bp_event start, bp_event end) override {
    OpScope scope("event_elapsed");
    return elapsed_event(device, start, end);
  }
  void synchronize(int32_t device) override {
    OpScope scope("synchronize");
    synchronize_device(device);
  }
  void memory_stats(int32_t device, bp_memory_stats& stats) override {
    OpScope scope("memory_stats");
    bp::cuda::memory_stats(device, stats);
  }
  bool has_memory_cache() const override { return true; }
  void empty_cache(int32_t device) override {
    OpScope scope("empty_cache");
    bp::cuda::empty_cache(device);
  }
  // DLPack's kDLCUDA data is a device address: it must be memory of this
  // device (or managed memory) that the runtime knows.
  bool has_memory_import() const override { return true; }
  void* import_memory(int32_t device, void* external, std::size_t) override {
    OpScope scope("import_memory");
    cudaPointerAttributes attrs{};
    if (cudaPointerGetAttributes(&attrs, external) != cudaSuccess) {
      (void)cudaGetLastError();
      BP_SDK_UNSUPPORTED("the address is not memory the CUDA runtime knows");
    }
    BP_SDK_REQUIRE(attrs.type == cudaMemoryTypeDevice || attrs.type == cudaMemoryTypeManaged,
                   "the address is not device memory (cudaPointerGetAttributes type "
                       << static_cast<int>(attrs.type) << ")");
    BP_SDK_REQUIRE(
        attrs.type == cudaMemoryTypeManaged || attrs.device == device,
        "the address is memory of CUDA device " << attrs.device << ", not of device " << device);
    return external;
  }

  // Page-locked host memory for the core's staging buffers: copies from it
  // overlap with the next chunk's transfer.
  bool has_host_alloc() const override { return true; }
  void* host_alloc(std::size_t nbytes) override {
    OpScope scope("host_alloc");
    void* p = nullptr;
    BP_CUDA_CHECK(cudaHostAlloc(&p, nbytes, cudaHostAllocPortable));
    staging_.add(p, nbytes);
    return p;
  }
  void host_free(void* host) override {
    staging_.remove(host);
    (void)cudaFreeHost(host);
  }

 private:
  bp::sdk::HostBuffers staging_;  // what host_alloc handed out
};

}  // namespace bp::cuda

BP_SDK_PLUGIN(bp::cuda::CudaPlugin)
