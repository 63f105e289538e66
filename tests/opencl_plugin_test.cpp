// Tests of the opencl plugin's internals on the OpenCL device of this
// machine (PoCL's CPU device, installed by quickstart.sh): device
// discovery, program builds (a failure shows the compiler's log), the
// program cache on disk, and the error record read at synchronisation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "opencl_backend.h"

namespace bp::opencl {
namespace {

namespace fs = std::filesystem;

const std::vector<std::pair<std::string, bp_dtype>> kFloatRoles = {{"T", BP_DTYPE_FLOAT32},
                                                                   {"B", BP_DTYPE_BOOL}};

// A fresh folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("bp-opencl-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::size_t files() const {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator(path)) n += e.is_regular_file() ? 1 : 0;
    return n;
  }
};

// A comment that makes a program's source, and so its cache key, unique.
std::string unique_extra() {
  return "\n// test " + std::to_string(::getpid()) + " " +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + "\n";
}

TEST(OpenclDevices, FindsTheDeviceOfThisMachine) {
  std::string reason;
  const auto& all = devices(&reason);
  ASSERT_FALSE(all.empty()) << "no OpenCL device: " << reason;
  EXPECT_TRUE(reason.empty());
  for (const Device& d : all) {
    EXPECT_NE(d.context, nullptr);
    EXPECT_GT(d.max_work_group, 0u);
    // "name [platform, OpenCL x.y, driver v]"
    const std::string text = describe(d);
    EXPECT_NE(text.find(d.name), std::string::npos) << text;
    EXPECT_NE(text.find(d.platform_name), std::string::npos) << text;
    EXPECT_NE(text.find("driver " + d.driver_version), std::string::npos) << text;
  }
}

TEST(OpenclDevices, GpusComeBeforeCpus) {
  const auto& all = devices();
  bool seen_non_gpu = false;
  for (const Device& d : all) {
    const bool gpu = (d.type & CL_DEVICE_TYPE_GPU) != 0;
    EXPECT_FALSE(gpu && seen_non_gpu) << d.name << " is a GPU listed after a device that is not";
    seen_non_gpu = seen_non_gpu || !gpu;
  }
}

TEST(OpenclDevices, AnIndexOutOfRangeIsAClearError) {
  try {
    device(static_cast<int32_t>(devices().size()));
    FAIL() << "no error";
  } catch (const bp::sdk::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no device"), std::string::npos) << e.what();
  }
}

TEST(OpenclPrograms, ABuildFailureShowsTheCompilersLog) {
  TempDir dir;
  set_cache_dir(dir.path.string());
  const ProgramSpec bad{"pointwise", kFloatRoles, unique_extra() + "this is not OpenCL C;\n"};
  try {
    kernel(0, bad, "add");
    FAIL() << "the program built";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("building the OpenCL program 'pointwise' (T=float32, B=bool)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("build log:"), std::string::npos) << what;
    // The compiler names the offending line.
    EXPECT_NE(what.find("error"), std::string::npos) << what;
  }
  EXPECT_EQ(dir.files(), 0u) << "a failed build left a file in the cache";
}

TEST(OpenclPrograms, ABuiltProgramIsCachedOnDiskOnce) {
  TempDir dir;
  set_cache_dir(dir.path.string());
  const ProgramSpec spec{"pointwise", kFloatRoles, unique_extra()};
  EXPECT_NE(kernel(0, spec, "add"), nullptr);
  EXPECT_EQ(dir.files(), 1u);
  // A second kernel of the same program reuses it: no second file.
  EXPECT_NE(kernel(0, spec, "mul"), nullptr);
  EXPECT_EQ(dir.files(), 1u);
  for (const auto& e : fs::directory_iterator(dir.path)) {
    EXPECT_EQ(e.path().filename().string().rfind("pointwise-", 0), 0u) << e.path();
    EXPECT_GT(e.file_size(), 0u);
  }
}

TEST(OpenclPrograms, NoFileWhenTheCacheIsOff) {
  TempDir dir;
  set_cache_dir("");
  const ProgramSpec spec{"pointwise", kFloatRoles, unique_extra()};
  EXPECT_NE(kernel(0, spec, "add"), nullptr);
  EXPECT_EQ(dir.files(), 0u);
}

TEST(OpenclPrograms, TheSourceDeclaresEveryRole) {
  const std::string src = program_source(
      device(0),
      ProgramSpec{
          "sum", {{"T", BP_DTYPE_FLOAT16}, {"O", BP_DTYPE_FLOAT16}, {"A", BP_DTYPE_FLOAT32}}, {}});
  EXPECT_NE(src.find("#define T_LOAD(p) vload_half"), std::string::npos);
  EXPECT_NE(src.find("#define O_STORE(p, v) vstore_half_rte"), std::string::npos);
  EXPECT_NE(src.find("#define A_C float"), std::string::npos);
  EXPECT_NE(src.find("REDUCE(sum,"), std::string::npos);
}

// Buffers for a one-element gather whose index (7) is out of range for a
// dim of size 3: the kernel finds it on the device.
struct BadGather {
  cl_mem x = nullptr, index = nullptr;
  BadGather() {
    cl_int err = CL_SUCCESS;
    x = clCreateBuffer(device(0).context, CL_MEM_READ_WRITE, 64, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    index = clCreateBuffer(device(0).context, CL_MEM_READ_WRITE, 8, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    const cl_long seven = 7;
    EXPECT_EQ(clEnqueueWriteBuffer(resolve(0, nullptr).queue, index, CL_TRUE, 0, 8, &seven, 0,
                                   nullptr, nullptr),
              CL_SUCCESS);
  }
  ~BadGather() {
    clReleaseMemObject(x);
    clReleaseMemObject(index);
  }
  void enqueue(Stream& s) const {
    cl_kernel k = kernel(0, ProgramSpec{"index", {{"T", BP_DTYPE_FLOAT32}}, {}}, "gather");
    int64_t shape[1] = {1}, strides[1] = {1};
    const Geo g = plain(1, shape, {strides, strides, strides}, {4, 8, 4}, {0, 0, 0});
    const cl_long dim_size = 3, x_dim_stride = 4;
    const cl_int op = BP_OP_GATHER, dim = 0;
    Args(k).mem(x).mem(x).mem(index) << g << dim_size << x_dim_stride << op << dim << s.errors;
    launch(s, k, 1);
  }
};

constexpr const char* kBadGatherMessage =
    "[gather] index 7 is out of range for dimension 0 of size 3 (found on the device)";

// A failure a kernel finds is reported by the stream's next
// synchronisation, once, with the op, index, dim and size.
TEST(OpenclStreams, AnErrorFoundOnTheDeviceIsReportedOnceAtSynchronisation) {
  Stream& s = resolve(0, nullptr);
  synchronize_stream(s);
  BadGather bad;
  bad.enqueue(s);
  try {
    synchronize_stream(s);
    FAIL() << "no error reported";
  } catch (const bp::sdk::DeviceError& e) {
    EXPECT_STREQ(e.what(), kBadGatherMessage);
  }
  EXPECT_NO_THROW(synchronize_stream(s)) << "reported twice";
  EXPECT_TRUE(query_stream(s));
}

// An event recorded after the failing work reports it; the stream then
// does not report it again.
TEST(OpenclEvents, AnEventAfterTheFailureReportsItOnce) {
  Stream& s = resolve(0, nullptr);
  synchronize_stream(s);
  BadGather bad;
  bp_event e = create_event(0);
  bad.enqueue(s);
  record_event(0, e, nullptr);
  try {
    synchronize_event(e);
    FAIL() << "no error reported";
  } catch (const bp::sdk::DeviceError& err) {
    EXPECT_STREQ(err.what(), kBadGatherMessage);
  }
  EXPECT_TRUE(query_event(e)) << "the event reported it a second time";
  EXPECT_NO_THROW(synchronize_stream(s)) << "the stream reported it again";
  destroy_event(e);
}

// An event recorded before the failing work does not report it: the stream does.
TEST(OpenclEvents, AnEventBeforeTheFailureDoesNotReportIt) {
  Stream& s = resolve(0, nullptr);
  synchronize_stream(s);
  BadGather bad;
  bp_event e = create_event(0);
  record_event(0, e, nullptr);
  bad.enqueue(s);
  EXPECT_NO_THROW(synchronize_event(e));
  EXPECT_THROW(synchronize_stream(s), bp::sdk::DeviceError);
  destroy_event(e);
}

// Recorded on a stream of its own, then on the default stream: the second
// record is what the event stands for.
TEST(OpenclEvents, ReRecordedOnAnotherStreamItFollowsTheLastRecord) {
  bp_stream other = create_stream(0);
  Stream& s = resolve(0, other);
  BadGather bad;
  bp_event e = create_event(0);
  bad.enqueue(s);
  record_event(0, e, other);
  record_event(0, e, nullptr);
  EXPECT_NO_THROW(synchronize_event(e)) << "a failure of the first stream reported for the second";
  EXPECT_THROW(synchronize_stream(s), bp::sdk::DeviceError);
  destroy_event(e);
  destroy_stream(0, other);
}

// An event outlives the stream it was recorded on: asking it afterwards is
// safe, and the failure went with the stream.
TEST(OpenclEvents, AnEventOutlivesItsStream) {
  bp_stream other = create_stream(0);
  BadGather bad;
  bad.enqueue(resolve(0, other));
  bp_event e = create_event(0);
  record_event(0, e, other);
  destroy_stream(0, other);
  EXPECT_TRUE(query_event(e));
  EXPECT_NO_THROW(synchronize_event(e));
  destroy_event(e);
}

}  // namespace
}  // namespace bp::opencl

namespace bp::opencl {
namespace {

// ABI 2.4's event_elapsed: the markers' profiling timestamps. Work between
// two events (a host-side wait the queue must honour) is inside the
// interval; before both marks are reached there is no answer.
TEST(OpenclEvents, TwoEventsTimeTheWorkBetweenThemByTheDevicesClock) {
  Stream& s = resolve(0, nullptr);
  synchronize_stream(s);
  bp_event a = create_event(0), b = create_event(0);
  cl_int err = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(device(0).context, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  record_event(0, a, nullptr);
  ASSERT_EQ(clEnqueueBarrierWithWaitList(s.queue, 1, &gate, nullptr), CL_SUCCESS);
  record_event(0, b, nullptr);
  EXPECT_FALSE(elapsed_events(a, b).has_value()) << "timed before the second mark was reached";
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_EQ(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  synchronize_event(b);
  const std::optional<double> ms = elapsed_events(a, b);
  ASSERT_TRUE(ms.has_value());
  EXPECT_GE(*ms, 25.0);  // the barrier held the queue for the 30 ms the host slept
  clReleaseEvent(gate);
  destroy_event(a);
  destroy_event(b);
}

}  // namespace
}  // namespace bp::opencl
