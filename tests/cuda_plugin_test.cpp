// Loads the cuda plugin as the core does (dlopen + bp_plugin_init) and checks
// what holds on any machine: it loads without a driver, describes itself,
// registers a kernel for every op, and counts devices. Without a GPU the
// count is 0 with the runtime's reason; with one, the device-side checks run
// too (allocation, copies, the caching allocator's reuse, one kernel).
#include <backplane/plugin.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

struct Loaded {
  const bp_plugin* plugin = nullptr;
  std::string error;
  int registrations = 0;
  bp_kernel_fn fn[BP_OP_COUNT][BP_DTYPE_COUNT] = {};
};

// The tiny registrar: counts calls and fills the (op, dtype) table,
// refusing duplicates as the core does.
bp_status count_kernel(void* ctx, const bp_kernel_registration* reg, bp_error* error) {
  auto* l = static_cast<Loaded*>(ctx);
  ++l->registrations;
  if (reg->op < 0 || reg->op >= BP_OP_COUNT || reg->fn == nullptr || reg->dtype_mask == 0) {
    std::snprintf(error->message, error->capacity, "bad registration at %s", reg->origin);
    return BP_STATUS_INVALID_ARGUMENT;
  }
  for (int d = 0; d < BP_DTYPE_COUNT; ++d) {
    if (!(reg->dtype_mask & BP_DTYPE_BIT(d))) continue;
    if (l->fn[reg->op][d] != nullptr) {
      std::snprintf(error->message, error->capacity, "duplicate kernel at %s", reg->origin);
      return BP_STATUS_INVALID_ARGUMENT;
    }
    l->fn[reg->op][d] = reg->fn;
  }
  return BP_STATUS_OK;
}

Loaded& loaded() {
  static Loaded l = [] {
    Loaded p;
    void* handle = dlopen(BACKPLANE_CUDA_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      p.error = std::string("dlopen: ") + dlerror();
      return p;
    }
    auto init = reinterpret_cast<bp_plugin_init_fn>(dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL));
    char buf[512] = {0};
    bp_error err{sizeof(bp_error), buf, sizeof(buf)};
    bp_host host{sizeof(bp_host), BP_ABI_MAJOR, BP_ABI_MINOR, "test"};
    if (init == nullptr) {
      p.error = "no " BP_PLUGIN_ENTRY_SYMBOL;
    } else if (init(&host, &p.plugin, &err) != BP_STATUS_OK) {
      p.error = std::string("init failed: ") + buf;
    }
    return p;
  }();
  return l;
}

// A GPU is expected where the kernel driver exposes one.
bool gpu_expected() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidia0", ec) ||
         (std::filesystem::is_directory("/proc/driver/nvidia/gpus", ec) &&
          !std::filesystem::is_empty("/proc/driver/nvidia/gpus", ec));
}

int device_count(std::string* reason = nullptr) {
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  const int n = p->device_count(p->ctx, buf, sizeof(buf));
  if (reason) *reason = buf;
  return n;
}

TEST(CudaPlugin, LoadsAndDescribesItself) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  const bp_plugin* p = loaded().plugin;
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->struct_size, sizeof(bp_plugin));
  EXPECT_STREQ(p->name, "cuda");
  EXPECT_EQ(p->abi_major, uint32_t(BP_ABI_MAJOR));
  EXPECT_EQ(p->abi_minor, uint32_t(BP_ABI_MINOR));
  EXPECT_EQ(p->dl_device_type, 2);  // kDLCUDA
  for (auto fn :
       {(void*)p->device_count, (void*)p->device_props, (void*)p->register_kernels,
        (void*)p->allocate, (void*)p->deallocate, (void*)p->copy_from_host, (void*)p->copy_to_host,
        (void*)p->copy_on_device, (void*)p->memset, (void*)p->synchronize, (void*)p->memory_stats})
    EXPECT_NE(fn, nullptr);
}

TEST(CudaPlugin, RegistersAKernelForEveryOp) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  Loaded& l = loaded();
  const bp_plugin* p = l.plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  bp_registrar reg{sizeof(bp_registrar), &l, &count_kernel, nullptr};
  ASSERT_EQ(p->register_kernels(p->ctx, &reg, &err), BP_STATUS_OK) << buf;
  EXPECT_GE(l.registrations, BP_OP_COUNT);
  for (int op = 0; op < BP_OP_COUNT; ++op) {
    bool any = false;
    for (int d = 0; d < BP_DTYPE_COUNT; ++d) any = any || l.fn[op][d] != nullptr;
    EXPECT_TRUE(any) << "no kernel for op " << op;
  }
  EXPECT_NE(l.fn[BP_OP_MATMUL][BP_DTYPE_FLOAT32], nullptr);
  EXPECT_NE(l.fn[BP_OP_COPY][BP_DTYPE_BOOL], nullptr);
  EXPECT_EQ(l.fn[BP_OP_MATMUL][BP_DTYPE_INT32], nullptr);
}

TEST(CudaPlugin, CountsDevicesOrSaysWhyNot) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  std::string reason;
  const int n = device_count(&reason);
  if (gpu_expected()) {
    EXPECT_GT(n, 0) << "a GPU is present but the plugin says: " << reason;
  } else {
    EXPECT_EQ(n, 0);
    EXPECT_FALSE(reason.empty());
    EXPECT_NE(reason.find("CUDA"), std::string::npos) << reason;
    EXPECT_NE(reason.find("cudaError"), std::string::npos) << reason;
  }
}

TEST(CudaPlugin, AllocationWithoutADeviceIsAnError) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() > 0) GTEST_SKIP() << "a device is present";
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  void* ptr = nullptr;
  EXPECT_NE(p->allocate(p->ctx, 0, 256, 64, &ptr, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[allocate]", 0), 0u) << buf;
}

TEST(CudaPlugin, DeviceMemoryRoundTripAndReuse) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  bp_device_props props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(p->device_props(p->ctx, 0, &props, &err), BP_STATUS_OK) << buf;
  EXPECT_GT(std::strlen(props.name), 0u);
  EXPECT_GT(props.total_memory, 0u);
  EXPECT_EQ(props.host_addressable, 0);

  std::vector<float> host(1000), back(1000, 0.0f);
  for (int i = 0; i < 1000; ++i) host[i] = float(i) * 0.5f;
  void* dev = nullptr;
  ASSERT_EQ(p->allocate(p->ctx, 0, 4000, 64, &dev, &err), BP_STATUS_OK) << buf;
  ASSERT_EQ(p->copy_from_host(p->ctx, 0, dev, host.data(), 4000, &err), BP_STATUS_OK) << buf;
  ASSERT_EQ(p->copy_to_host(p->ctx, 0, back.data(), dev, 4000, &err), BP_STATUS_OK) << buf;
  EXPECT_EQ(host, back);

  // A second block of the same size class comes from the cache.
  bp_memory_stats before{}, after{};
  before.struct_size = after.struct_size = sizeof(bp_memory_stats);
  ASSERT_EQ(p->memory_stats(p->ctx, 0, &before, &err), BP_STATUS_OK) << buf;
  p->deallocate(p->ctx, 0, dev, 4000);
  ASSERT_EQ(p->allocate(p->ctx, 0, 3900, 64, &dev, &err), BP_STATUS_OK) << buf;
  ASSERT_EQ(p->memory_stats(p->ctx, 0, &after, &err), BP_STATUS_OK) << buf;
  EXPECT_EQ(after.num_system_allocs, before.num_system_allocs);
  EXPECT_EQ(after.num_allocs, before.num_allocs + 1);

  // One kernel: dev = dev + 2 * dev through ADD with alpha.
  Loaded& l = loaded();
  bp_registrar reg{sizeof(bp_registrar), &l, &count_kernel, nullptr};
  if (l.fn[BP_OP_ADD][BP_DTYPE_FLOAT32] == nullptr) {
    ASSERT_EQ(p->register_kernels(p->ctx, &reg, &err), BP_STATUS_OK) << buf;
  }
  ASSERT_EQ(p->copy_from_host(p->ctx, 0, dev, host.data(), 3900, &err), BP_STATUS_OK) << buf;
  int64_t shape[1] = {975}, strides[1] = {1};
  bp_tensor t{dev, {2, 0}, 1, {2, 32, 1}, shape, strides, 0};
  bp_tensor in[2] = {t, t};
  bp_attrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.num_scalars = 1;
  attrs.scalars[0].dtype = BP_DTYPE_FLOAT64;
  attrs.scalars[0].value.f = 2.0;
  bp_kernel_call call{sizeof(call), BP_OP_ADD, BP_DTYPE_FLOAT32, 2, 1, in, &t, &attrs};
  ASSERT_EQ(l.fn[BP_OP_ADD][BP_DTYPE_FLOAT32](nullptr, &call, &err), BP_STATUS_OK) << buf;
  ASSERT_EQ(p->copy_to_host(p->ctx, 0, back.data(), dev, 3900, &err), BP_STATUS_OK) << buf;
  for (int i = 0; i < 975; ++i) ASSERT_EQ(back[i], host[i] * 3.0f) << "element " << i;
  p->deallocate(p->ctx, 0, dev, 3900);
  EXPECT_EQ(p->synchronize(p->ctx, 0, &err), BP_STATUS_OK) << buf;
}

}  // namespace
