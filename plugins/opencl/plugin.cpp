// Entry point of the opencl plugin: one backend device per OpenCL device
// (GPUs first), cl_mem buffers behind the opaque memory handles, in-order
// command queues as streams, markers as events, and kernels in OpenCL C
// compiled per device on first use (program.cpp). Loading touches no
// OpenCL API: the platforms are enumerated on the first device query.
#include <backplane/sdk/options.hpp>

#include "opencl_backend.h"

namespace bp::opencl {

class OpenclPlugin final : public bp::sdk::Plugin {
 public:
  explicit OpenclPlugin(const bp::sdk::Options& options) {
    bp::sdk::set_default_op("opencl");
    if (options.has("log")) {
      const std::string v = options.get("log", "");
      if (v != "on" && v != "off")
        throw bp::sdk::InvalidArgument("[--backend-option] log=" + v + ": expected on or off");
      set_log_programs(v == "on");
    }
    if (options.has("cache")) {
      const std::string v = options.get("cache", "");
      if (v == "off")
        set_cache_dir("");
      else if (!v.empty() && v[0] == '/')
        set_cache_dir(v);
      else
        throw bp::sdk::InvalidArgument("[--backend-option] cache=" + v +
                                       ": expected an absolute folder or 'off'");
    }
  }

  const char* name() const override { return "opencl"; }
  const char* version() const override { return "0.1.0"; }
  int32_t dl_device_type() const override { return 4; /* kDLOpenCL */ }

  std::vector<bp_option_info> options() const override {
    return {{"cache",
             "folder for compiled OpenCL programs, or 'off' (default: "
             "$XDG_CACHE_HOME/backplane/opencl, else ~/.cache/backplane/opencl)"},
            {"log",
             "on: print each OpenCL program built or loaded from the cache, with the time "
             "it took, to stderr (default: off)"}};
  }

  int32_t device_count(std::string& reason) const override {
    return static_cast<int32_t>(devices(&reason).size());
  }
  void device_props(int32_t index, bp_device_props& props) const override {
    OpScope scope("device_props");
    const Device& d = device(index);
    const std::string text = describe(d);
    std::snprintf(props.name, sizeof props.name, "%s", text.c_str());
    props.total_memory = d.memory;
    props.host_addressable = 0;
  }

  void register_kernels(Registrar& r) override {
    register_copy_kernels(r);
    register_pointwise_kernels(r);
    register_reduce_kernels(r);
    register_sort_kernels(r);
    register_index_kernels(r);
    register_matmul_kernels(r);
    register_nn_kernels(r);
    register_optim_kernels(r);
  }

  void* allocate(int32_t index, bp_stream stream, std::size_t nbytes, std::size_t) override {
    OpScope scope("allocate");
    return bp::opencl::allocate(index, stream, nbytes);
  }
  void deallocate(int32_t index, bp_stream stream, void* mem, std::size_t) override {
    bp::opencl::deallocate(index, stream, as_mem(mem));
  }
  // DLPack's kDLOpenCL data is a cl_mem: one of this device's context, at
  // least as large as what the core uses, held (retained) while in use.
  bool has_memory_import() const override { return true; }
  void* import_memory(int32_t index, void* external, std::size_t nbytes) override {
    OpScope scope("import_memory");
    const Device& d = device(index);
    cl_mem m = as_mem(external);
    cl_context context = nullptr;
    const cl_int st = clGetMemObjectInfo(m, CL_MEM_CONTEXT, sizeof(context), &context, nullptr);
    BP_SDK_REQUIRE(st == CL_SUCCESS,
                   "the handle is not a cl_mem (clGetMemObjectInfo: " << cl_error_name(st) << ")");
    BP_SDK_REQUIRE(context == d.context,
                   "the cl_mem belongs to another OpenCL context than "
                   "device "
                       << index << "'s; create it in that context");
    std::size_t size = 0;
    BP_CL_CHECK(clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof(size), &size, nullptr));
    BP_SDK_REQUIRE(size >= nbytes,
                   "the cl_mem has " << size << " bytes and the tensor reaches " << nbytes);
    BP_CL_CHECK(clRetainMemObject(m));
    return external;
  }
  void release_import(int32_t, void* mem) override { clReleaseMemObject(as_mem(mem)); }

  void copy_from_host(int32_t index, bp_stream stream, void* mem, uint64_t offset, const void* host,
                      std::size_t n) override {
    OpScope scope("copy_from_host");
    if (n == 0) return;
    // Blocking: the core reuses `host` as soon as this returns. The write
    // is still ordered in the stream (an in-order queue).
    Stream& s = resolve(index, stream);
    BP_CL_CHECK(
        clEnqueueWriteBuffer(s.queue, as_mem(mem), CL_TRUE, offset, n, host, 0, nullptr, nullptr));
  }
  void copy_to_host(int32_t index, bp_stream stream, void* host, const void* mem, uint64_t offset,
                    std::size_t n) override {
    OpScope scope("copy_to_host");
    if (n == 0) return;
    // Enqueued only: the core synchronises the stream before it reads `host`.
    Stream& s = resolve(index, stream);
    BP_CL_CHECK(
        clEnqueueReadBuffer(s.queue, as_mem(mem), CL_FALSE, offset, n, host, 0, nullptr, nullptr));
    ++s.submitted;
    clFlush(s.queue);
  }
  void copy_on_device(bp_stream stream, int32_t dst_device, void* dst, uint64_t dst_offset,
                      int32_t src_device, const void* src, uint64_t src_offset,
                      std::size_t n) override {
    OpScope scope("copy_on_device");
    if (n == 0) return;
    Stream& s = resolve(dst_device, stream);
    if (src_device == dst_device) {
      BP_CL_CHECK(clEnqueueCopyBuffer(s.queue, as_mem(src), as_mem(dst), src_offset, dst_offset, n,
                                      0, nullptr, nullptr));
      ++s.submitted;
      return;
    }
    // Devices have contexts of their own: through the host. The core has
    // ordered the source's stream before this one.
    std::vector<unsigned char> staging(n);
    Stream& from = resolve(src_device, nullptr);
    BP_CL_CHECK(clEnqueueReadBuffer(from.queue, as_mem(src), CL_TRUE, src_offset, n, staging.data(),
                                    0, nullptr, nullptr));
    BP_CL_CHECK(clEnqueueWriteBuffer(s.queue, as_mem(dst), CL_TRUE, dst_offset, n, staging.data(),
                                     0, nullptr, nullptr));
  }
  void memset(int32_t index, bp_stream stream, void* mem, uint64_t offset, int32_t value,
              std::size_t n) override {
    OpScope scope("memset");
    if (n == 0) return;
    const cl_uchar pattern = static_cast<cl_uchar>(value);
    Stream& s = resolve(index, stream);
    BP_CL_CHECK(
        clEnqueueFillBuffer(s.queue, as_mem(mem), &pattern, 1, offset, n, 0, nullptr, nullptr));
    ++s.submitted;
  }
  void* host_pointer(int32_t index, const void*, uint64_t) override {
    OpScope scope("host_pointer");
    BP_SDK_UNSUPPORTED("memory of opencl device "
                       << index << " is not host addressable; copy it to the host");
  }

  bp_stream stream_create(int32_t index) override {
    OpScope scope("stream_create");
    return create_stream(index);
  }
  void stream_destroy(int32_t index, bp_stream stream) override {
    OpScope scope("stream_destroy");
    destroy_stream(index, stream);
  }
  void stream_synchronize(int32_t index, bp_stream stream) override {
    OpScope scope("stream_synchronize");
    synchronize_stream(resolve(index, stream));
  }
  bool stream_query(int32_t index, bp_stream stream) override {
    OpScope scope("stream_query");
    return query_stream(resolve(index, stream));
  }
  bp_event event_create(int32_t index) override {
    OpScope scope("event_create");
    return create_event(index);
  }
  void event_destroy(int32_t, bp_event event) override { destroy_event(event); }
  void event_record(int32_t index, bp_event event, bp_stream stream) override {
    OpScope scope("event_record");
    record_event(index, event, stream);
  }
  void stream_wait_event(int32_t index, bp_stream stream, bp_event event) override {
    OpScope scope("stream_wait_event");
    wait_event(index, stream, event);
  }
  bool event_query(int32_t, bp_event event) override {
    OpScope scope("event_query");
    return query_event(event);
  }
  void event_synchronize(int32_t, bp_event event) override {
    OpScope scope("event_synchronize");
    synchronize_event(event);
  }
  bool has_event_timing() const override { return true; }
  std::optional<double> event_elapsed(int32_t, bp_event start, bp_event end) override {
    OpScope scope("event_elapsed");
    return elapsed_events(start, end);
  }
  void synchronize(int32_t index) override {
    OpScope scope("synchronize");
    synchronize_device(index);
  }
  void memory_stats(int32_t index, bp_memory_stats& stats) override {
    bp::opencl::memory_stats(index, stats);
  }
};

}  // namespace bp::opencl

BP_SDK_PLUGIN(bp::opencl::OpenclPlugin)
