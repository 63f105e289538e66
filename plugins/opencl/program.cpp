// Programs: the embedded OpenCL C (kernels/*.cl) compiled per device and
// per dtype roles on first use. A built program's binary is kept on disk,
// keyed by a hash of the device, its driver, the build options and the
// source, so a second process loads it instead of compiling (docs/opencl.md
// has the times). A failed build throws with the compiler's log.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>

#include "opencl_backend.h"

namespace bp::opencl {

// Generated from kernels/*.cl at build time (embed_sources.cmake).
const char* embedded_source(const std::string& name);

namespace {

struct RoleType {
  const char* c;       // compute type
  const char* u;       // unsigned twin
  const char* load;    // of byte address p
  const char* store;   // of v at p
  const char* scalar;  // from the bits of a long
  const char* lowest;
  const char* highest;
  int is_float, is_bool, is_double;
};

RoleType role_type(bp_dtype d, bool fp64) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return {"int",
              "uint",
              "((int)(*(__global const uchar *)(p) != 0))",
              "(*(__global uchar *)(p) = (uchar)((v) != 0))",
              "((int)((bits) != 0))",
              "0",
              "1",
              0,
              1,
              0};
    case BP_DTYPE_INT8:
      return {"char",
              "uchar",
              "(*(__global const char *)(p))",
              "(*(__global char *)(p) = (char)(v))",
              "((char)(bits))",
              "CHAR_MIN",
              "CHAR_MAX",
              0,
              0,
              0};
    case BP_DTYPE_UINT8:
      return {"uchar",
              "uchar",
              "(*(__global const uchar *)(p))",
              "(*(__global uchar *)(p) = (uchar)(v))",
              "((uchar)(bits))",
              "0",
              "UCHAR_MAX",
              0,
              0,
              0};
    case BP_DTYPE_INT16:
      return {"short",
              "ushort",
              "(*(__global const short *)(p))",
              "(*(__global short *)(p) = (short)(v))",
              "((short)(bits))",
              "SHRT_MIN",
              "SHRT_MAX",
              0,
              0,
              0};
    case BP_DTYPE_INT32:
      return {"int",
              "uint",
              "(*(__global const int *)(p))",
              "(*(__global int *)(p) = (int)(v))",
              "((int)(bits))",
              "INT_MIN",
              "INT_MAX",
              0,
              0,
              0};
    case BP_DTYPE_INT64:
      return {"long",
              "ulong",
              "(*(__global const long *)(p))",
              "(*(__global long *)(p) = (long)(v))",
              "((long)(bits))",
              "LONG_MIN",
              "LONG_MAX",
              0,
              0,
              0};
    case BP_DTYPE_FLOAT32:
      return {"float",
              "float",
              "(*(__global const float *)(p))",
              "(*(__global float *)(p) = (float)(v))",
              "as_float((uint)(bits))",
              "(-INFINITY)",
              "INFINITY",
              1,
              0,
              0};
    case BP_DTYPE_FLOAT64:
      if (fp64)
        return {"double",
                "double",
                "(*(__global const double *)(p))",
                "(*(__global double *)(p) = (double)(v))",
                "as_double((ulong)(bits))",
                "(-INFINITY)",
                "INFINITY",
                1,
                0,
                1};
      break;
    case BP_DTYPE_FLOAT16:
      return {"float",
              "float",
              "vload_half(0, (__global const half *)(p))",
              "vstore_half_rte((float)(v), 0, (__global half *)(p))",
              "as_float((uint)(bits))",
              "(-INFINITY)",
              "INFINITY",
              1,
              0,
              0};
    case BP_DTYPE_BFLOAT16:
      return {"float",
              "float",
              "bf16_to_float(*(__global const ushort *)(p))",
              "(*(__global ushort *)(p) = float_to_bf16((float)(v)))",
              "as_float((uint)(bits))",
              "(-INFINITY)",
              "INFINITY",
              1,
              0,
              0};
    default:
      break;
  }
  BP_SDK_UNSUPPORTED("dtype " << bp::sdk::dtype_name(d)
                              << " is not available on this OpenCL device");
}

std::string role_macros(const std::string& r, bp_dtype d, bool fp64) {
  const RoleType t = role_type(d, fp64);
  std::ostringstream os;
  os << "#define " << r << "_C " << t.c << "\n"
     << "#define " << r << "_U " << t.u << "\n"
     << "#define " << r << "_LOAD(p) " << t.load << "\n"
     << "#define " << r << "_STORE(p, v) " << t.store << "\n"
     << "#define " << r << "_SCALAR(bits) " << t.scalar << "\n"
     << "#define " << r << "_LOWEST " << t.lowest << "\n"
     << "#define " << r << "_HIGHEST " << t.highest << "\n"
     << "#define " << r << "_IS_FLOAT " << t.is_float << "\n"
     << "#define " << r << "_IS_BOOL " << t.is_bool << "\n"
     << "#define " << r << "_IS_DOUBLE " << t.is_double << "\n"
     << "#define " << r << "_SIZE " << bp::sdk::dtype_size(d) << "\n";
  return os.str();
}

std::string build_options(const Device& d) {
  std::string o = "-cl-std=CL1.2";
  if (d.correctly_rounded) o += " -cl-fp32-correctly-rounded-divide-sqrt";
  return o;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

std::string build_log(const Device& d, cl_program p) {
  size_t n = 0;
  clGetProgramBuildInfo(p, d.id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n > 0) clGetProgramBuildInfo(p, d.id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// A program loaded from the cache, or null when there is none (or it is stale).
cl_program load_cached(const Device& d, const std::string& path, const std::string& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.empty()) return nullptr;
  const size_t n = bytes.size();
  const unsigned char* data = bytes.data();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = clCreateProgramWithBinary(d.context, 1, &d.id, &n, &data, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (p != nullptr) clReleaseProgram(p);
    return nullptr;
  }
  if (clBuildProgram(p, 1, &d.id, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(p);
    return nullptr;
  }
  return p;
}

// Writes the program's binary beside the others: to a temporary file first,
// renamed into place, so a reader never sees half a file. Failures only
// cost the next process a compile.
void store_cached(const Device& d, cl_program p, const std::string& dir, const std::string& path) {
  size_t n = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr) != CL_SUCCESS || n == 0)
    return;
  std::vector<unsigned char> bytes(n);
  unsigned char* out = bytes.data();
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof out, &out, nullptr) != CL_SUCCESS) return;
  (void)d;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

std::string roles_text(const ProgramSpec& spec) {
  std::string roles;
  for (const auto& [r, dt] : spec.roles)
    roles += (roles.empty() ? "" : ", ") + r + "=" + bp::sdk::dtype_name(dt);
  return roles;
}

void log_program(const ProgramSpec& spec, const char* what,
                 std::chrono::steady_clock::time_point start) {
  if (!log_programs()) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "[opencl] program %s (%s) %s in %.1f ms\n", spec.family,
               roles_text(spec).c_str(), what, ms);
}

cl_program build(const Device& d, const ProgramSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  const std::string source = program_source(d, spec);
  const std::string options = build_options(d);
  const std::string dir = cache_dir();
  std::string path;
  if (!dir.empty()) {
    const uint64_t h = fnv1a(source, fnv1a(options, fnv1a(d.name + '\n' + d.vendor + '\n' +
                                                          d.driver_version + '\n' + d.version)));
    path = dir + "/" + spec.family + "-" + hex(h) + ".bin";
    if (cl_program p = load_cached(d, path, options)) {
      log_program(spec, "loaded from the cache", start);
      return p;
    }
  }
  const char* text = source.c_str();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(d.context, 1, &text, nullptr, &err);
  BP_CL_CHECK(err);
  err = clBuildProgram(p, 1, &d.id, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    const std::string log = build_log(d, p);
    clReleaseProgram(p);
    BP_SDK_FAIL(std::runtime_error, "building the OpenCL program '"
                                        << spec.family << "' (" << roles_text(spec) << ") for "
                                        << d.name << " failed: " << cl_error_name(err)
                                        << "; build log:\n"
                                        << log);
  }
  if (!path.empty()) store_cached(d, p, dir, path);
  log_program(spec, path.empty() ? "built (cache off)" : "built and cached", start);
  return p;
}

std::string spec_key(int32_t device, const ProgramSpec& spec) {
  std::string k = std::to_string(device) + ':' + spec.family;
  for (const auto& [r, d] : spec.roles) k += ':' + r + std::to_string(static_cast<int>(d));
  if (!spec.extra.empty()) k += ':' + hex(fnv1a(spec.extra));
  return k;
}

std::mutex& programs_mutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::map<std::string, cl_program>& programs() {
  static auto* m = new std::map<std::string, cl_program>;
  return *m;
}

cl_program program(int32_t index, const ProgramSpec& spec, const std::string& key) {
  std::lock_guard<std::mutex> lock(programs_mutex());
  auto it = programs().find(key);
  if (it != programs().end()) return it->second;
  cl_program p = build(device(index), spec);
  programs().emplace(key, p);
  return p;
}

// Kernel objects of the calling thread (clSetKernelArg is not thread-safe
// on one kernel object). Released with the thread.
struct ThreadKernels {
  std::unordered_map<std::string, cl_kernel> map;
  ~ThreadKernels() {
    for (auto& [k, v] : map) clReleaseKernel(v);
  }
};

}  // namespace

std::string program_source(const Device& d, const ProgramSpec& spec) {
  std::string s;
  if (d.fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define HAS_FP64 1\n";
  for (const auto& [r, dt] : spec.roles) s += role_macros(r, dt, d.fp64);
  // Variant switches (#define lines at the head of `extra`) go before the code.
  std::string extra = spec.extra;
  while (extra.rfind("#define ", 0) == 0) {
    const std::size_t end = extra.find('\n');
    s += extra.substr(0, end + 1);
    extra.erase(0, end + 1);
  }
  s += embedded_source("common");
  s += embedded_source(spec.family == std::string("sum") || spec.family == std::string("minmax")
                           ? "reduce"
                           : spec.family);
  s += extra;
  return s;
}

cl_kernel kernel(int32_t device_index, const ProgramSpec& spec, const char* name) {
  thread_local ThreadKernels cache;
  std::string key = spec_key(device_index, spec);
  key += '/';
  key += name;
  auto it = cache.map.find(key);
  if (it != cache.map.end()) return it->second;
  cl_program p = program(device_index, spec, key.substr(0, key.rfind('/')));
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(p, name, &err);
  BP_CL_CHECK(err);
  cache.map.emplace(std::move(key), k);
  return k;
}

}  // namespace bp::opencl
