// Devices: every OpenCL device of every platform the ICD loader finds,
// GPUs first, then CPUs, then accelerators; one context each. Nothing runs
// at load: the platforms are enumerated on the first device query, so the
// plugin loads (and reports zero devices, with the reason) where there is
// no OpenCL platform.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "opencl_backend.h"

namespace bp::opencl {

namespace {

std::string platform_info(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

std::string device_info(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

int rank(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return 0;
  if (t & CL_DEVICE_TYPE_CPU) return 1;
  return 2;
}

struct Found {
  std::vector<Device> devices;
  std::string reason;
};

Found find_devices() {
  Found f;
  cl_uint np = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &np);
  if (err != CL_SUCCESS || np == 0) {
    f.reason = std::string("no OpenCL platform: clGetPlatformIDs returned ") +
               (err == CL_SUCCESS ? "none" : cl_error_name(err)) +
               " (an ICD such as pocl-opencl-icd registers one in /etc/OpenCL/vendors)";
    return f;
  }
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  std::vector<std::string> skipped;
  for (cl_platform_id p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ids(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
    for (cl_device_id id : ids) {
      Device d;
      d.platform = p;
      d.id = id;
      d.type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
      d.name = device_info(id, CL_DEVICE_NAME);
      d.platform_name = platform_info(p, CL_PLATFORM_NAME);
      d.vendor = device_info(id, CL_DEVICE_VENDOR);
      d.driver_version = device_info(id, CL_DRIVER_VERSION);
      d.version = device_info(id, CL_DEVICE_VERSION);
      d.memory = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      d.max_alloc = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d.max_work_group = device_value<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      const std::string ext = device_info(id, CL_DEVICE_EXTENSIONS);
      d.fp64 = ext.find("cl_khr_fp64") != std::string::npos;
      d.correctly_rounded = (device_value<cl_device_fp_config>(id, CL_DEVICE_SINGLE_FP_CONFIG) &
                             CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      if (!device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) ||
          !device_value<cl_bool>(id, CL_DEVICE_COMPILER_AVAILABLE)) {
        skipped.push_back(d.name + " (not available or has no compiler)");
        continue;
      }
      cl_int cerr = CL_SUCCESS;
      d.context = clCreateContext(nullptr, 1, &id, nullptr, nullptr, &cerr);
      if (cerr != CL_SUCCESS) {
        skipped.push_back(d.name + " (clCreateContext: " + cl_error_name(cerr) + ")");
        continue;
      }
      f.devices.push_back(std::move(d));
    }
  }
  std::stable_sort(f.devices.begin(), f.devices.end(),
                   [](const Device& a, const Device& b) { return rank(a.type) < rank(b.type); });
  if (f.devices.empty()) {
    f.reason = "no usable OpenCL device on " + std::to_string(np) + " platform(s)";
    for (const std::string& s : skipped) f.reason += "; " + s;
  }
  return f;
}

const Found& found() {
  // Never destroyed: contexts stay valid for kernels cached by threads that
  // outlive every plugin instance, and for instances of the library that
  // share them (plugin.h, "Instances").
  static const Found* f = new Found(find_devices());
  return *f;
}

std::string& cache_dir_storage() {
  static std::string* dir = [] {
    std::string d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0')
      d = std::string(x) + "/backplane/opencl";
    else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
      d = std::string(h) + "/.cache/backplane/opencl";
    return new std::string(d);
  }();
  return *dir;
}

}  // namespace

const std::vector<Device>& devices(std::string* reason) {
  const Found& f = found();
  if (reason != nullptr) *reason = f.reason;
  return f.devices;
}

const Device& device(int32_t index) {
  const auto& all = devices();
  if (index < 0 || static_cast<std::size_t>(index) >= all.size())
    BP_SDK_FAIL(::bp::sdk::InvalidArgument,
                "the opencl backend has no device " << index << " (it has " << all.size() << ")");
  return all[static_cast<std::size_t>(index)];
}

std::string describe(const Device& d) {
  // CL_DEVICE_VERSION is "OpenCL <major.minor> <vendor text>": the first two words.
  std::string version = d.version;
  if (auto sp = version.find(' '); sp != std::string::npos)
    if (auto sp2 = version.find(' ', sp + 1); sp2 != std::string::npos) version.resize(sp2);
  return d.name + " [" + d.platform_name + ", " + version + ", driver " + d.driver_version + "]";
}

std::mutex& cache_dir_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}

void set_cache_dir(std::string dir) {
  std::lock_guard<std::mutex> lock(cache_dir_mutex());
  cache_dir_storage() = std::move(dir);
}
std::string cache_dir() {
  std::lock_guard<std::mutex> lock(cache_dir_mutex());
  return cache_dir_storage();
}

namespace {
std::atomic<bool> g_log_programs{false};
}  // namespace
void set_log_programs(bool on) { g_log_programs = on; }
bool log_programs() { return g_log_programs; }

const char* cl_error_name(cl_int err) {
  switch (err) {
#define BP_CL_ERR(x) \
  case x:            \
    return #x;
    BP_CL_ERR(CL_DEVICE_NOT_FOUND)
    BP_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    BP_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    BP_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    BP_CL_ERR(CL_OUT_OF_RESOURCES)
    BP_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    BP_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    BP_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    BP_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    BP_CL_ERR(CL_INVALID_VALUE)
    BP_CL_ERR(CL_INVALID_DEVICE)
    BP_CL_ERR(CL_INVALID_CONTEXT)
    BP_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    BP_CL_ERR(CL_INVALID_MEM_OBJECT)
    BP_CL_ERR(CL_INVALID_BINARY)
    BP_CL_ERR(CL_INVALID_BUILD_OPTIONS)
    BP_CL_ERR(CL_INVALID_PROGRAM)
    BP_CL_ERR(CL_INVALID_PROGRAM_EXECUTABLE)
    BP_CL_ERR(CL_INVALID_KERNEL_NAME)
    BP_CL_ERR(CL_INVALID_KERNEL)
    BP_CL_ERR(CL_INVALID_ARG_INDEX)
    BP_CL_ERR(CL_INVALID_ARG_VALUE)
    BP_CL_ERR(CL_INVALID_ARG_SIZE)
    BP_CL_ERR(CL_INVALID_KERNEL_ARGS)
    BP_CL_ERR(CL_INVALID_WORK_DIMENSION)
    BP_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    BP_CL_ERR(CL_INVALID_WORK_ITEM_SIZE)
    BP_CL_ERR(CL_INVALID_GLOBAL_OFFSET)
    BP_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    BP_CL_ERR(CL_INVALID_EVENT)
    BP_CL_ERR(CL_INVALID_OPERATION)
    BP_CL_ERR(CL_INVALID_BUFFER_SIZE)
    BP_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
#undef BP_CL_ERR
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "an OpenCL error";
  }
}

void throw_cl_error(const char* call, cl_int err) {
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
    throw std::bad_alloc();
  std::ostringstream os;
  os << "[" << current_op() << "] " << call << " failed: " << cl_error_name(err) << " (" << err
     << ")";
  throw std::runtime_error(os.str());
}

}  // namespace bp::opencl
