// Loads the cuda plugin as the core does (dlopen + bp_plugin_init) and checks
// what holds on any machine: it loads without a driver, describes itself,
// registers a kernel for every op, and counts devices. Without a GPU the
// count is 0 with the runtime's reason, and device calls fail with a message
// naming the entry point; with one, the device-side checks run too
// (allocation, copies on streams, the caching allocator's reuse per stream,
// events, kernels, and failures found on the device reported once by the
// synchronisations, never by the kernel call).
#include <backplane/plugin.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <type_traits>
#include <utility>
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
    bp_host host{sizeof(bp_host), BP_ABI_MAJOR, BP_ABI_MINOR, "test", nullptr, 0, 0};
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
       {(void*)p->device_count,      (void*)p->device_props,   (void*)p->register_kernels,
        (void*)p->allocate,          (void*)p->deallocate,     (void*)p->copy_from_host,
        (void*)p->copy_to_host,      (void*)p->copy_on_device, (void*)p->memset,
        (void*)p->stream_create,     (void*)p->stream_destroy, (void*)p->stream_synchronize,
        (void*)p->event_create,      (void*)p->event_destroy,  (void*)p->event_record,
        (void*)p->stream_wait_event, (void*)p->event_query,    (void*)p->event_synchronize,
        (void*)p->synchronize,       (void*)p->host_pointer,   (void*)p->memory_stats})
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
  EXPECT_NE(p->allocate(p->ctx, 0, nullptr, 256, 64, &ptr, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[allocate]", 0), 0u) << buf;
}

TEST(CudaPlugin, StreamsAndEventsWithoutADeviceAreErrors) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() > 0) GTEST_SKIP() << "a device is present";
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  bp_stream s = nullptr;
  EXPECT_NE(p->stream_create(p->ctx, 0, &s, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[stream_create]", 0), 0u) << buf;
  bp_event e = nullptr;
  EXPECT_NE(p->event_create(p->ctx, 0, &e, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[event_create]", 0), 0u) << buf;
  EXPECT_NE(p->stream_synchronize(p->ctx, 0, nullptr, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[stream_synchronize]", 0), 0u) << buf;
  EXPECT_NE(p->synchronize(p->ctx, 0, &err), BP_STATUS_OK);
  EXPECT_EQ(std::string(buf).rfind("[synchronize]", 0), 0u) << buf;
}

TEST(CudaPlugin, DeviceMemoryIsNotHostAddressable) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  int dummy = 0;
  void* out = nullptr;
  EXPECT_EQ(p->host_pointer(p->ctx, 0, &dummy, 0, &out, &err), BP_STATUS_UNSUPPORTED);
  EXPECT_EQ(std::string(buf).rfind("[host_pointer]", 0), 0u) << buf;
}

// ---------------------------------------------------------------------------
// With a GPU
// ---------------------------------------------------------------------------

// A call into the plugin table that keeps the message of a failure.
struct Api {
  const bp_plugin* p = loaded().plugin;
  char buf[512] = {0};
  bp_error err{sizeof(bp_error), buf, sizeof(buf)};
  std::string message() const { return buf; }
};

// The kernel table, registered once.
Loaded& kernels() {
  Loaded& l = loaded();
  if (l.fn[BP_OP_ADD][BP_DTYPE_FLOAT32] == nullptr) {
    Api a;
    bp_registrar reg{sizeof(bp_registrar), &l, &count_kernel, nullptr};
    EXPECT_EQ(a.p->register_kernels(a.p->ctx, &reg, &a.err), BP_STATUS_OK) << a.buf;
  }
  return l;
}

bp_stream new_stream() {
  Api a;
  bp_stream s = nullptr;
  EXPECT_EQ(a.p->stream_create(a.p->ctx, 0, &s, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_NE(s, nullptr);
  return s;
}

// A contiguous 1-D tensor of device 0 in plugin memory, freed with its stream.
template <class T>
struct Buffer {
  bp_stream stream;
  std::vector<T> init;
  void* mem = nullptr;
  int64_t shape[1], strides[1] = {1};

  Buffer(bp_stream s, std::vector<T> values) : stream(s), init(std::move(values)) {
    shape[0] = static_cast<int64_t>(init.size());
    Api a;
    EXPECT_EQ(a.p->allocate(a.p->ctx, 0, stream, bytes(), 16, &mem, &a.err), BP_STATUS_OK) << a.buf;
    EXPECT_EQ(a.p->copy_from_host(a.p->ctx, 0, stream, mem, 0, init.data(), bytes(), &a.err),
              BP_STATUS_OK)
        << a.buf;
  }
  ~Buffer() {
    Api a;
    a.p->deallocate(a.p->ctx, 0, stream, mem, bytes());
  }
  std::size_t bytes() const { return init.size() * sizeof(T); }
  bp_tensor tensor() {
    const bp_dl_dtype dt = std::is_same_v<T, float>     ? bp_dl_dtype{2, 32, 1}
                           : std::is_same_v<T, int64_t> ? bp_dl_dtype{0, 64, 1}
                                                        : bp_dl_dtype{0, 32, 1};
    return bp_tensor{mem, {2, 0}, 1, dt, shape, strides, 0};
  }
  // Reads the values back (waits for the stream; expects no failure).
  std::vector<T> read() {
    Api a;
    std::vector<T> out(init.size());
    EXPECT_EQ(a.p->copy_to_host(a.p->ctx, 0, stream, out.data(), mem, 0, bytes(), &a.err),
              BP_STATUS_OK)
        << a.buf;
    EXPECT_EQ(a.p->stream_synchronize(a.p->ctx, 0, stream, &a.err), BP_STATUS_OK) << a.buf;
    return out;
  }
};

// Runs the (op, dtype) kernel on `stream` with ints[0] = dim.
bp_status run(bp_op op, bp_dtype dtype, std::vector<bp_tensor> in, bp_tensor out, bp_stream stream,
              std::vector<int64_t> ints = {}, Api* api = nullptr) {
  Api local;
  Api& a = api ? *api : local;
  bp_attrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.num_ints = static_cast<int32_t>(ints.size());
  for (std::size_t k = 0; k < ints.size(); ++k) attrs.ints[k] = ints[k];
  bp_kernel_call call{
      sizeof(call), op, dtype, static_cast<int32_t>(in.size()), 1, in.data(), &out, &attrs, 0, 0,
      stream};
  bp_kernel_fn fn = kernels().fn[op][dtype];
  EXPECT_NE(fn, nullptr);
  return fn == nullptr ? BP_STATUS_UNSUPPORTED : fn(nullptr, &call, &a.err);
}

TEST(CudaPlugin, DeviceMemoryRoundTripAndReuse) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Api a;
  const bp_plugin* p = a.p;
  bp_device_props props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(p->device_props(p->ctx, 0, &props, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_GT(std::strlen(props.name), 0u);
  EXPECT_GT(props.total_memory, 0u);
  EXPECT_EQ(props.host_addressable, 0);

  std::vector<float> host(1000), back(1000, 0.0f);
  for (int i = 0; i < 1000; ++i) host[i] = float(i) * 0.5f;
  void* dev = nullptr;
  ASSERT_EQ(p->allocate(p->ctx, 0, nullptr, 4000, 64, &dev, &a.err), BP_STATUS_OK) << a.buf;
  ASSERT_EQ(p->copy_from_host(p->ctx, 0, nullptr, dev, 0, host.data(), 4000, &a.err), BP_STATUS_OK)
      << a.buf;
  ASSERT_EQ(p->copy_to_host(p->ctx, 0, nullptr, back.data(), dev, 0, 4000, &a.err), BP_STATUS_OK)
      << a.buf;
  ASSERT_EQ(p->stream_synchronize(p->ctx, 0, nullptr, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_EQ(host, back);

  // Byte offsets: memset 8 bytes at 16, copy 4 bytes in at 20, read 16 at 12.
  const float seven = 7.0f;
  ASSERT_EQ(p->memset(p->ctx, 0, nullptr, dev, 16, 0, 8, &a.err), BP_STATUS_OK) << a.buf;
  ASSERT_EQ(p->copy_from_host(p->ctx, 0, nullptr, dev, 20, &seven, 4, &a.err), BP_STATUS_OK)
      << a.buf;
  float window[4] = {};
  ASSERT_EQ(p->copy_to_host(p->ctx, 0, nullptr, window, dev, 12, 16, &a.err), BP_STATUS_OK)
      << a.buf;
  ASSERT_EQ(p->stream_synchronize(p->ctx, 0, nullptr, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_EQ(window[0], host[3]);
  EXPECT_EQ(window[1], 0.0f);
  EXPECT_EQ(window[2], 7.0f);
  EXPECT_EQ(window[3], host[6]);

  // A second block of the same size class, for the same stream, comes from
  // the cache at once.
  bp_memory_stats before{}, after{};
  before.struct_size = after.struct_size = sizeof(bp_memory_stats);
  ASSERT_EQ(p->memory_stats(p->ctx, 0, &before, &a.err), BP_STATUS_OK) << a.buf;
  p->deallocate(p->ctx, 0, nullptr, dev, 4000);
  void* again = nullptr;
  ASSERT_EQ(p->allocate(p->ctx, 0, nullptr, 3900, 64, &again, &a.err), BP_STATUS_OK) << a.buf;
  ASSERT_EQ(p->memory_stats(p->ctx, 0, &after, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_EQ(again, dev);
  EXPECT_EQ(after.num_system_allocs, before.num_system_allocs);
  EXPECT_EQ(after.num_allocs, before.num_allocs + 1);
  p->deallocate(p->ctx, 0, nullptr, again, 3900);

  // One kernel on the default stream: x = x + 2 * x through ADD with alpha.
  Buffer<float> x(nullptr, std::vector<float>(host.begin(), host.begin() + 975));
  bp_tensor t = x.tensor();
  Api k;
  bp_attrs attrs{};
  attrs.struct_size = sizeof(attrs);
  attrs.num_scalars = 1;
  attrs.scalars[0].dtype = BP_DTYPE_FLOAT64;
  attrs.scalars[0].value.f = 2.0;
  bp_tensor in[2] = {t, t};
  bp_kernel_call call{sizeof(call), BP_OP_ADD, BP_DTYPE_FLOAT32, 2, 1, in, &t, &attrs, 0, 0,
                      nullptr};
  ASSERT_EQ(kernels().fn[BP_OP_ADD][BP_DTYPE_FLOAT32](nullptr, &call, &k.err), BP_STATUS_OK)
      << k.buf;
  const std::vector<float> sum = x.read();
  for (int i = 0; i < 975; ++i) ASSERT_EQ(sum[i], host[i] * 3.0f) << "element " << i;
  EXPECT_EQ(p->synchronize(p->ctx, 0, &a.err), BP_STATUS_OK) << a.buf;
}

TEST(CudaPlugin, EventsOrderStreams) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Api a;
  const bp_plugin* p = a.p;
  bp_stream s1 = new_stream(), s2 = new_stream();
  bp_event e = nullptr;
  ASSERT_EQ(p->event_create(p->ctx, 0, &e, &a.err), BP_STATUS_OK) << a.buf;
  EXPECT_EQ(p->event_query(p->ctx, 0, e, &a.err), BP_STATUS_OK) << "never recorded";
  {
    std::vector<int64_t> values(1 << 19);  // 4 MiB
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = int64_t(i) * 3;
    Buffer<int64_t> src(s1, values);
    Buffer<int64_t> dst(s2, std::vector<int64_t>(values.size(), 0));
    ASSERT_EQ(p->event_record(p->ctx, 0, e, s1, &a.err), BP_STATUS_OK) << a.buf;
    ASSERT_EQ(p->stream_wait_event(p->ctx, 0, s2, e, &a.err), BP_STATUS_OK) << a.buf;
    ASSERT_EQ(p->copy_on_device(p->ctx, s2, 0, dst.mem, 8, 0, src.mem, 0, src.bytes() - 8, &a.err),
              BP_STATUS_OK)
        << a.buf;
    EXPECT_EQ(p->event_synchronize(p->ctx, 0, e, &a.err), BP_STATUS_OK) << a.buf;
    EXPECT_EQ(p->event_query(p->ctx, 0, e, &a.err), BP_STATUS_OK) << a.buf;
    const std::vector<int64_t> got = dst.read();
    EXPECT_EQ(got[0], 0);
    for (std::size_t i = 1; i < got.size(); ++i) ASSERT_EQ(got[i], values[i - 1]) << i;
    // `src` belongs to s1; `dst` was used by s2 only: the buffers go back to
    // their streams' pools when they leave this scope.
    ASSERT_EQ(p->stream_synchronize(p->ctx, 0, s1, &a.err), BP_STATUS_OK) << a.buf;
  }
  p->event_destroy(p->ctx, 0, e);
  p->stream_destroy(p->ctx, 0, s1);
  p->stream_destroy(p->ctx, 0, s2);
}

// A bad index does not fail the kernel call: the failure is kept on the
// device and returned once, by the first synchronisation that covers it.
TEST(CudaPlugin, DeviceErrorsAreReportedOnceBySynchronisations) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Api a;
  const bp_plugin* p = a.p;
  const std::string gather_msg =
      "[gather] index 7 is out of range for dimension 0 of size 3 (found on the device)";
  bp_stream s = new_stream();
  bp_event e = nullptr;
  ASSERT_EQ(p->event_create(p->ctx, 0, &e, &a.err), BP_STATUS_OK) << a.buf;
  {
    Buffer<float> src(s, {1.0f, 2.0f, 3.0f});
    Buffer<int64_t> bad(s, {7});
    Buffer<float> out(s, {0.0f});
    const auto bad_gather = [&](bp_stream on) {
      Api k;
      EXPECT_EQ(run(BP_OP_GATHER, BP_DTYPE_FLOAT32, {src.tensor(), bad.tensor()}, out.tensor(), on,
                    {0}, &k),
                BP_STATUS_OK)
          << k.buf;
    };

    // stream_synchronize.
    bad_gather(s);
    EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_DEVICE_ERROR);
    EXPECT_EQ(a.message(), gather_msg);
    EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_OK) << a.buf;

    // event_synchronize, then nothing left for the stream.
    bad_gather(s);
    ASSERT_EQ(p->event_record(p->ctx, 0, e, s, &a.err), BP_STATUS_OK) << a.buf;
    EXPECT_EQ(p->event_synchronize(p->ctx, 0, e, &a.err), BP_STATUS_DEVICE_ERROR);
    EXPECT_EQ(a.message(), gather_msg);
    EXPECT_EQ(p->event_synchronize(p->ctx, 0, e, &a.err), BP_STATUS_OK) << a.buf;
    EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_OK) << a.buf;

    // event_query, polled.
    bad_gather(s);
    ASSERT_EQ(p->event_record(p->ctx, 0, e, s, &a.err), BP_STATUS_OK) << a.buf;
    bp_status st = BP_STATUS_NOT_READY;
    while (st == BP_STATUS_NOT_READY) st = p->event_query(p->ctx, 0, e, &a.err);
    EXPECT_EQ(st, BP_STATUS_DEVICE_ERROR);
    EXPECT_EQ(a.message(), gather_msg);
    EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_OK) << a.buf;

    // An event recorded before the failing work does not report it.
    ASSERT_EQ(p->event_record(p->ctx, 0, e, s, &a.err), BP_STATUS_OK) << a.buf;
    bad_gather(s);
    EXPECT_EQ(p->event_synchronize(p->ctx, 0, e, &a.err), BP_STATUS_OK) << a.buf;
    EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_DEVICE_ERROR);

    // synchronize(device) covers every stream of the device: this one and the
    // default stream.
    bad_gather(s);
    {
      Api k;
      Buffer<int64_t> neg(nullptr, {-2});
      Buffer<float> src0(nullptr, {1.0f, 2.0f, 3.0f});
      Buffer<float> out0(nullptr, {0.0f});
      EXPECT_EQ(run(BP_OP_INDEX_SELECT, BP_DTYPE_FLOAT32, {src0.tensor(), neg.tensor()},
                    out0.tensor(), nullptr, {0}, &k),
                BP_STATUS_OK)
          << k.buf;
      EXPECT_EQ(p->synchronize(p->ctx, 0, &a.err), BP_STATUS_DEVICE_ERROR);
      EXPECT_NE(a.message().find(gather_msg), std::string::npos) << a.buf;
      EXPECT_NE(a.message().find("[index_select] index -2 is out of range for dimension 0 of size "
                                 "3 (found on the device)"),
                std::string::npos)
          << a.buf;
      EXPECT_EQ(p->synchronize(p->ctx, 0, &a.err), BP_STATUS_OK) << a.buf;
    }

    // Later work on the stream still runs.
    Buffer<int64_t> good(s, {2});
    Api k;
    EXPECT_EQ(run(BP_OP_GATHER, BP_DTYPE_FLOAT32, {src.tensor(), good.tensor()}, out.tensor(), s,
                  {0}, &k),
              BP_STATUS_OK)
        << k.buf;
    EXPECT_EQ(out.read(), std::vector<float>{3.0f});
  }
  p->event_destroy(p->ctx, 0, e);
  EXPECT_EQ(p->stream_synchronize(p->ctx, 0, s, &a.err), BP_STATUS_OK) << a.buf;
  p->stream_destroy(p->ctx, 0, s);
}

// A failed in-place op leaves its operand unchanged (IP-10) without the
// kernel call waiting for the check.
TEST(CudaPlugin, FailedInPlaceOpsLeaveSelfUnchanged) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Api a;
  const bp_plugin* p = a.p;
  Buffer<float> self(nullptr, {1.0f, 2.0f, 3.0f});
  Buffer<int64_t> index(nullptr, {0, 7});
  Buffer<float> src(nullptr, {-1.0f, -1.0f});
  Api k;
  EXPECT_EQ(run(BP_OP_SCATTER, BP_DTYPE_FLOAT32, {index.tensor(), src.tensor()}, self.tensor(),
                nullptr, {0, 0}, &k),
            BP_STATUS_OK)
      << k.buf;
  EXPECT_EQ(p->stream_synchronize(p->ctx, 0, nullptr, &a.err), BP_STATUS_DEVICE_ERROR);
  EXPECT_EQ(a.message(),
            "[scatter] index 7 is out of range for dimension 0 of size 3 (found on the device)");
  EXPECT_EQ(self.read(), (std::vector<float>{1.0f, 2.0f, 3.0f}));

  Buffer<int64_t> base(nullptr, {2, 3, 4}), exponent(nullptr, {1, -2, 2});
  EXPECT_EQ(run(BP_OP_POW, BP_DTYPE_INT64, {base.tensor(), exponent.tensor()}, base.tensor(),
                nullptr, {}, &k),
            BP_STATUS_OK)
      << k.buf;
  EXPECT_EQ(p->stream_synchronize(p->ctx, 0, nullptr, &a.err), BP_STATUS_DEVICE_ERROR);
  EXPECT_EQ(a.message(),
            "[pow] integers to negative integer powers are not allowed: exponent -2 (found on the "
            "device)");
  EXPECT_EQ(base.read(), (std::vector<int64_t>{2, 3, 4}));
}

// A freed block is reused at once by its own stream, and by another only
// once the work its stream had enqueued before the free is done.
TEST(CudaPlugin, AllocatorReusesBlocksAcrossStreamsOnlyWhenSafe) {
  ASSERT_TRUE(loaded().error.empty()) << loaded().error;
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Api a;
  const bp_plugin* p = a.p;
  const std::size_t n = (std::size_t(7) << 20) + 1;  // an 8 MiB class no other test uses
  bp_stream sa = new_stream(), sb = new_stream(), sc = new_stream();
  const auto system_allocs = [&] {
    bp_memory_stats m{};
    m.struct_size = sizeof(m);
    EXPECT_EQ(p->memory_stats(p->ctx, 0, &m, &a.err), BP_STATUS_OK) << a.buf;
    return m.num_system_allocs;
  };
  const auto alloc = [&](bp_stream s) {
    void* mem = nullptr;
    EXPECT_EQ(p->allocate(p->ctx, 0, s, n, 64, &mem, &a.err), BP_STATUS_OK) << a.buf;
    return mem;
  };
  void* x = alloc(sa);
  ASSERT_EQ(p->memset(p->ctx, 0, sa, x, 0, 1, n, &a.err), BP_STATUS_OK) << a.buf;
  p->deallocate(p->ctx, 0, sa, x, n);
  // Same stream: at once, without waiting.
  void* again = alloc(sa);
  EXPECT_EQ(again, x);
  p->deallocate(p->ctx, 0, sa, again, n);
  // Another stream right after the free: not this block (sa may still be
  // running the memset); this request fences sa.
  const uint64_t before_b = system_allocs();
  void* y = alloc(sb);
  EXPECT_NE(y, x);
  EXPECT_EQ(system_allocs(), before_b + 1);
  // Once sa has passed the free, a third stream gets the block from the cache.
  ASSERT_EQ(p->stream_synchronize(p->ctx, 0, sa, &a.err), BP_STATUS_OK) << a.buf;
  const uint64_t before_c = system_allocs();
  void* z = alloc(sc);
  EXPECT_EQ(z, x);
  EXPECT_EQ(system_allocs(), before_c);
  p->deallocate(p->ctx, 0, sb, y, n);
  p->deallocate(p->ctx, 0, sc, z, n);
  EXPECT_EQ(p->synchronize(p->ctx, 0, &a.err), BP_STATUS_OK) << a.buf;
  for (bp_stream s : {sa, sb, sc}) p->stream_destroy(p->ctx, 0, s);
}

}  // namespace
