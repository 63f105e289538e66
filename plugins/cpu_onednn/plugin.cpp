// Entry point of the cpu_onednn plugin: host memory, one CPU device, and the
// kernel families, each registered by its own file.
#include "allocator.h"
#include "cpu_onednn.h"

namespace bp::cpu {

namespace {
// The large-block cache's bounds: the options cache_limit_mib and
// cache_keep_free_mib over this machine's defaults.
LargeCacheLimits cache_limits(const bp::sdk::Options& options) {
  LargeCacheLimits l = LargeCacheLimits::for_this_machine();
  constexpr long long kMaxMib = 1LL << 30;
  l.limit_bytes = static_cast<std::size_t>(options.get_int(
                      "cache_limit_mib", static_cast<long long>(l.limit_bytes >> 20), 0, kMaxMib))
                  << 20;
  l.keep_free_bytes =
      static_cast<std::size_t>(options.get_int(
          "cache_keep_free_mib", static_cast<long long>(l.keep_free_bytes >> 20), 0, kMaxMib))
      << 20;
  return l;
}
}  // namespace

class CpuOnednnPlugin final : public bp::sdk::Plugin {
 public:
  explicit CpuOnednnPlugin(const bp::sdk::Options& options) : allocator_(cache_limits(options)) {}

  const char* name() const override { return "cpu_onednn"; }
  const char* version() const override { return "0.1.0"; }

  void device_props(int32_t device, bp_device_props& props) const override {
    fill_device_props(device, props);
  }

  void register_kernels(Registrar& r) override {
    register_copy_kernels(r);
    register_binary_kernels(r);
    register_unary_kernels(r);
    register_reduce_kernels(r);
    register_matmul_kernels(r);
    register_compare_kernels(r);
    register_argreduce_kernels(r);
    register_sort_kernels(r);
    register_softmax_kernels(r);
    register_index_kernels(r);
    register_random_kernels(r);
    register_conv_kernels(r);
    register_norm_kernels(r);
    register_pool_kernels(r);
    register_sparse_kernels(r);
    register_optim_kernels(r);
    // float16, bfloat16, int8, uint8, int16: computed through the float32
    // and int64 kernels above (bp::sdk::emulate_narrow_dtypes).
    r.emulate_narrow_dtypes(wide_);
  }

  // Handles are host pointers. The host runs a primitive before oneDNN's
  // execute() returns, so every ABI stream's work is done when the call
  // that enqueued it returns: the SDK's host streams and events apply, and
  // freed memory can go to any stream at once.
  void* allocate(int32_t, bp_stream, std::size_t nbytes, std::size_t alignment) override {
    return allocator_.allocate(nbytes, alignment);
  }
  void deallocate(int32_t, bp_stream, void* ptr, std::size_t nbytes) override {
    allocator_.deallocate(ptr, nbytes);
  }
  // Host memory of another library (DLPack kDLCPU): its address is the
  // handle, and every kernel takes any address aligned to its element.
  bool has_memory_import() const override { return true; }
  void memory_stats(int32_t, bp_memory_stats& stats) override { allocator_.stats(stats); }
  bool has_memory_cache() const override { return true; }
  void empty_cache(int32_t) override {
    allocator_.empty_cache();
    empty_scratch_cache();  // oneDNN's temporaries (shared by every instance)
  }

  std::vector<bp_option_info> options() const override {
    return {{"cache_limit_mib",
             "most MiB of freed blocks of 4 MiB and up kept for reuse (default: an eighth of "
             "this machine's memory, at most 4096; 0: none kept)"},
            {"cache_keep_free_mib",
             "memory pressure: while the system has fewer MiB than this available, freed "
             "blocks go back at once and the cache is emptied (default: a sixteenth of this "
             "machine's memory; 0: never)"}};
  }

 private:
  HostAllocator allocator_;
  std::deque<bp::sdk::WideKernel> wide_;
};

}  // namespace bp::cpu

BP_SDK_PLUGIN(bp::cpu::CpuOnednnPlugin)
