// Shared by the tests that load the cpu_onednn plugin themselves: the
// dlopen + bp_plugin_init loader with a registrar that records kernels,
// strided test buffers with sentinel-filled gaps, and reference helpers.
// Header-only (inline), so several files of one test program may include it.
#pragma once

#include <backplane/plugin.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace plugin_harness {

using Shape = std::vector<int64_t>;

struct LoadedPlugin {
  const bp_plugin* plugin = nullptr;
  bp_kernel_fn fn[BP_OP_COUNT][BP_DTYPE_COUNT] = {};
  void* ctx[BP_OP_COUNT][BP_DTYPE_COUNT] = {};
  std::string error;
};

inline bp_status register_kernel(void* ctx, const bp_kernel_registration* reg, bp_error* error) {
  auto* p = static_cast<LoadedPlugin*>(ctx);
  for (int d = 0; d < BP_DTYPE_COUNT; ++d) {
    if (!(reg->dtype_mask & BP_DTYPE_BIT(d))) continue;
    if (p->fn[reg->op][d] != nullptr) {
      std::snprintf(error->message, error->capacity, "duplicate kernel at %s", reg->origin);
      return BP_STATUS_INVALID_ARGUMENT;
    }
    p->fn[reg->op][d] = reg->fn;
    p->ctx[reg->op][d] = reg->kernel_ctx;
  }
  return BP_STATUS_OK;
}

inline const LoadedPlugin& plugin() {
  static LoadedPlugin loaded = [] {
    LoadedPlugin p;
    const std::string path = std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/libbackplane_cpu_onednn.so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      p.error = dlerror();
      return p;
    }
    auto init = reinterpret_cast<bp_plugin_init_fn>(dlsym(handle, BP_PLUGIN_ENTRY_SYMBOL));
    char buf[512] = {0};
    bp_error err{sizeof(bp_error), buf, sizeof(buf)};
    bp_host host{sizeof(bp_host), BP_ABI_MAJOR, BP_ABI_MINOR, "test", nullptr, 0, 0};
    if (init == nullptr || init(&host, &p.plugin, &err) != BP_STATUS_OK) {
      p.error = std::string("init failed: ") + buf;
      return p;
    }
    bp_registrar reg{sizeof(bp_registrar), &p, &register_kernel, nullptr};
    if (p.plugin->register_kernels(p.plugin->ctx, &reg, &err) != BP_STATUS_OK)
      p.error = std::string("register_kernels failed: ") + buf;
    return p;
  }();
  return loaded;
}

enum class Layout { contiguous, transposed, stepped, offset, broadcast };
inline const char* layout_name(Layout l) {
  const char* names[] = {"contiguous", "transposed", "stepped", "offset", "broadcast"};
  return names[int(l)];
}

inline const size_t kDtypeBytes[] = {1, 4, 8, 4, 8};
inline size_t dtype_bytes(bp_dtype d) { return kDtypeBytes[d]; }
inline bool is_float(bp_dtype d) { return d == BP_DTYPE_FLOAT32 || d == BP_DTYPE_FLOAT64; }

inline void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  for (int64_t s : shape)
    if (s == 0) return;
  Shape idx(shape.size(), 0);
  for (;;) {
    f(idx);
    int d = int(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Calls f(T{}) with the storage type of `d` (bool is read as its byte).
template <class F>
auto with_type(bp_dtype d, F&& f) {
  switch (d) {
    case BP_DTYPE_BOOL:
      return f(uint8_t{});
    case BP_DTYPE_INT32:
      return f(int32_t{});
    case BP_DTYPE_INT64:
      return f(int64_t{});
    case BP_DTYPE_FLOAT32:
      return f(float{});
    default:
      return f(double{});
  }
}

template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// A tensor in its own storage, with a layout picked by the test.
struct Buf {
  bp_dtype dtype;
  Shape shape, strides;
  int64_t offset = 0;
  std::vector<uint64_t> storage;
  bp_tensor t{};

  char* at(const Shape& idx) {
    int64_t off = offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    return reinterpret_cast<char*>(storage.data()) + off * dtype_bytes(dtype);
  }
  double get(const Shape& idx) {
    return with_type(dtype,
                     [&](auto t) { return double(*reinterpret_cast<decltype(t)*>(at(idx))); });
  }
  void set(const Shape& idx, double v) {
    with_type(dtype, [&](auto t) {
      using T = decltype(t);
      *reinterpret_cast<T*>(at(idx)) = std::is_same_v<T, uint8_t> ? T(v != 0) : T(v);
    });
  }
  const bp_tensor& desc() {
    const bp_dl_dtype dl[] = {{6, 8, 1}, {0, 32, 1}, {0, 64, 1}, {2, 32, 1}, {2, 64, 1}};
    t = bp_tensor{storage.data(),
                  {1, 0},
                  int32_t(shape.size()),
                  dl[dtype],
                  shape.data(),
                  strides.data(),
                  uint64_t(offset * dtype_bytes(dtype))};
    return t;
  }
};

inline Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= std::max<int64_t>(shape[d], 1);
  }
  return s;
}

// Deterministic values that keep every reference computation exact.
inline double value(bp_dtype d, uint64_t i, bool nonzero) {
  uint64_t r = (i + 1) * 6364136223846793005ull + 1442695040888963407ull;
  r ^= r >> 29;
  double v = d == BP_DTYPE_BOOL ? double(r % 2)
             : is_float(d)      ? (double(r % 33) - 16) * 0.25
                                : double(r % 101) - 50;
  return nonzero && v == 0 ? 1 : v;
}

// Filled with values; `seed` varies them between operands. Unaddressed
// storage holds a sentinel byte that outputs must leave alone.
inline Buf make(bp_dtype dtype, const Shape& shape, Layout layout, uint64_t seed = 0,
                bool nonzero = false) {
  Buf b{dtype, shape, Shape(shape.size()), 0, {}, {}};
  const int nd = int(shape.size());
  if (layout == Layout::transposed) {
    const Shape rev(shape.rbegin(), shape.rend());
    const Shape rs = contiguous_strides(rev);
    for (int d = 0; d < nd; ++d) b.strides[d] = rs[nd - 1 - d];
  } else if (layout == Layout::broadcast && nd > 0) {
    Shape inner(shape.begin() + 1, shape.end());
    const Shape is = contiguous_strides(inner);
    b.strides[0] = 0;
    for (int d = 1; d < nd; ++d) b.strides[d] = is[d - 1];
  } else {
    b.strides = contiguous_strides(shape);
    if (layout == Layout::stepped)
      for (auto& s : b.strides) s *= 2;
  }
  if (layout == Layout::offset) b.offset = 5;
  int64_t span = b.offset + 1;
  for (int d = 0; d < nd; ++d) span += (shape[d] > 0 ? shape[d] - 1 : 0) * b.strides[d];
  b.storage.assign(size_t(span) * dtype_bytes(dtype) / 8 + 1, 0x5555555555555555ull);
  uint64_t i = seed * 1000003;
  for_each_index(shape, [&](const Shape& idx) { b.set(idx, value(dtype, i++, nonzero)); });
  return b;
}

// True when every byte outside b's elements still holds make()'s sentinel.
inline bool gaps_intact(Buf& b) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(b.storage.data());
  std::vector<bool> used(b.storage.size() * 8);
  for_each_index(b.shape, [&](const Shape& idx) {
    const size_t off = size_t(reinterpret_cast<uint8_t*>(b.at(idx)) - bytes);
    for (size_t k = 0; k < dtype_bytes(b.dtype); ++k) used[off + k] = true;
  });
  for (size_t k = 0; k < used.size(); ++k)
    if (!used[k] && bytes[k] != 0x55) return false;
  return true;
}

inline bp_attrs attrs_with(std::vector<bp_scalar> scalars, std::vector<int64_t> ints = {}) {
  bp_attrs a{};
  a.struct_size = sizeof(a);
  a.num_scalars = int32_t(scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) a.scalars[i] = scalars[i];
  a.num_ints = int32_t(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) a.ints[i] = ints[i];
  return a;
}
inline bp_scalar fscalar(double v) { return bp_scalar{BP_DTYPE_FLOAT64, 0, {v}}; }
inline bp_scalar iscalar(int64_t v) {
  bp_scalar s{BP_DTYPE_INT64, 0, {}};
  s.value.i = v;
  return s;
}

struct CallResult {
  bp_status status;
  std::string message;
};

// Runs one kernel and returns its status and message.
inline CallResult call(bp_op op, bp_dtype dispatch, std::vector<Buf*> in, Buf& out,
                       const bp_attrs& attrs) {
  const LoadedPlugin& p = plugin();
  if (!p.error.empty()) return {BP_STATUS_RUNTIME_ERROR, p.error};
  if (p.fn[op][dispatch] == nullptr) return {BP_STATUS_UNSUPPORTED, "not registered"};
  std::vector<bp_tensor> ins;
  for (Buf* b : in) ins.push_back(b->desc());
  const bp_tensor o = out.desc();
  bp_kernel_call c{sizeof(c), op, dispatch, int32_t(ins.size()), 1, ins.data(), &o, &attrs};
  char buf[512] = {0};
  bp_error err{sizeof(err), buf, sizeof(buf)};
  const bp_status st = p.fn[op][dispatch](p.ctx[op][dispatch], &c, &err);
  return {st, buf};
}

// Runs one kernel; checks it succeeded and left the output's gaps alone.
inline void run(bp_op op, bp_dtype dispatch, std::vector<Buf*> in, Buf& out,
                const bp_attrs& attrs) {
  ASSERT_EQ(plugin().error, "");
  ASSERT_NE(plugin().fn[op][dispatch], nullptr) << "op " << op << " dtype " << dispatch;
  const CallResult r = call(op, dispatch, in, out, attrs);
  ASSERT_EQ(r.status, BP_STATUS_OK) << r.message;
  EXPECT_TRUE(gaps_intact(out)) << "the kernel wrote outside the output's elements";
}

// f(index) for every index of `shape`, in row-major order.
inline std::vector<double> collect(const Shape& shape,
                                   const std::function<double(const Shape&)>& f) {
  std::vector<double> v;
  for_each_index(shape, [&](const Shape& i) { v.push_back(f(i)); });
  return v;
}

// Exact for every dtype but float32 (division and oneDNN's f32 arithmetic),
// unless `f64_tol` allows float64 a relative error too. NaN must match NaN,
// and an infinity must match exactly.
inline void expect_values(Buf& out, const std::vector<double>& want, double f64_tol = 0,
                          double f32_tol = 1e-5) {
  size_t k = 0;
  int failures = 0;
  for_each_index(out.shape, [&](const Shape& i) {
    const double got = out.get(i), w = want[k++];
    const double rel = out.dtype == BP_DTYPE_FLOAT32   ? f32_tol
                       : out.dtype == BP_DTYPE_FLOAT64 ? f64_tol
                                                       : 0;
    const bool ok = std::isnan(w)   ? std::isnan(got)
                    : std::isinf(w) ? got == w
                                    : std::abs(got - w) <= rel * std::max(1.0, std::abs(w));
    if (!ok && failures++ < 10)
      ADD_FAILURE() << "at flat index " << k - 1 << " got " << got << ", want " << w;
  });
}

inline const bp_dtype kAll[] = {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32,
                                BP_DTYPE_FLOAT64};
inline const Layout kDenseish[] = {Layout::contiguous, Layout::transposed, Layout::stepped,
                                   Layout::offset};
inline const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::stepped,
                                  Layout::offset, Layout::broadcast};
// Small shapes take the plugin's loops; the large one oneDNN and threads.
inline const Shape kShapes[] = {{3, 4, 5}, {}, {0, 4}, {7}, {300, 257}};

// Floating buffers only: overwrites a sparse, seed-dependent set of
// elements with NaN, +inf and -inf.
inline void add_specials(Buf& b, uint64_t seed = 0) {
  if (!is_float(b.dtype)) return;
  uint64_t k = seed;
  for_each_index(b.shape, [&](const Shape& i) {
    if (k % 17 == 3) b.set(i, std::nan(""));
    if (k % 23 == 5) b.set(i, INFINITY);
    if (k % 29 == 7) b.set(i, -INFINITY);
    ++k;
  });
}

}  // namespace plugin_harness
