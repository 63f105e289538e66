// Loads the cpu_onednn plugin as the core would (dlopen + bp_plugin_init),
// and checks every kernel on contiguous, transposed, stepped, broadcast,
// offset, empty and 0-d descriptors against plain reference loops. Large
// cases take the oneDNN and multi-threaded paths, small ones the loops.
#include <backplane/plugin.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Shape = std::vector<int64_t>;

struct LoadedPlugin {
  const bp_plugin* plugin = nullptr;
  bp_kernel_fn fn[BP_OP_COUNT][BP_DTYPE_COUNT] = {};
  void* ctx[BP_OP_COUNT][BP_DTYPE_COUNT] = {};
  std::string error;
};

bp_status register_kernel(void* ctx, const bp_kernel_registration* reg, bp_error* error) {
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

const LoadedPlugin& plugin() {
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
    bp_host host{sizeof(bp_host), BP_ABI_MAJOR, BP_ABI_MINOR, "test"};
    if (init == nullptr || init(&host, &p.plugin, &err) != BP_STATUS_OK) {
      p.error = std::string("init failed: ") + buf;
      return p;
    }
    bp_registrar reg{sizeof(bp_registrar), &p, &register_kernel};
    if (p.plugin->register_kernels(p.plugin->ctx, &reg, &err) != BP_STATUS_OK)
      p.error = std::string("register_kernels failed: ") + buf;
    return p;
  }();
  return loaded;
}

enum class Layout { contiguous, transposed, stepped, offset, broadcast };
const char* layout_name(Layout l) {
  const char* names[] = {"contiguous", "transposed", "stepped", "offset", "broadcast"};
  return names[int(l)];
}

const size_t kDtypeBytes[] = {1, 4, 8, 4, 8};
size_t dtype_bytes(bp_dtype d) {
  return kDtypeBytes[d];
}
bool is_float(bp_dtype d) {
  return d == BP_DTYPE_FLOAT32 || d == BP_DTYPE_FLOAT64;
}

void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
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

Shape contiguous_strides(const Shape& shape) {
  Shape s(shape.size());
  int64_t acc = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= std::max<int64_t>(shape[d], 1);
  }
  return s;
}

// Deterministic values that keep every reference computation exact.
double value(bp_dtype d, uint64_t i, bool nonzero) {
  uint64_t r = (i + 1) * 6364136223846793005ull + 1442695040888963407ull;
  r ^= r >> 29;
  double v = d == BP_DTYPE_BOOL ? double(r % 2)
             : is_float(d)      ? (double(r % 33) - 16) * 0.25
                                : double(r % 101) - 50;
  return nonzero && v == 0 ? 1 : v;
}

// Filled with values; `seed` varies them between operands. Unaddressed
// storage holds a sentinel byte that outputs must leave alone.
Buf make(bp_dtype dtype, const Shape& shape, Layout layout, uint64_t seed = 0,
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
bool gaps_intact(Buf& b) {
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

bp_attrs attrs_with(std::vector<bp_scalar> scalars) {
  bp_attrs a{};
  a.struct_size = sizeof(a);
  a.num_scalars = int32_t(scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) a.scalars[i] = scalars[i];
  return a;
}
bp_scalar fscalar(double v) {
  return bp_scalar{BP_DTYPE_FLOAT64, 0, {v}};
}

// Runs one kernel; checks it succeeded and left the output's gaps alone.
void run(bp_op op, bp_dtype dispatch, std::vector<Buf*> in, Buf& out, const bp_attrs& attrs) {
  const LoadedPlugin& p = plugin();
  ASSERT_EQ(p.error, "");
  ASSERT_NE(p.fn[op][dispatch], nullptr) << "op " << op << " dtype " << dispatch;
  std::vector<bp_tensor> ins;
  for (Buf* b : in) ins.push_back(b->desc());
  const bp_tensor o = out.desc();
  bp_kernel_call call{sizeof(call), op, dispatch, int32_t(ins.size()), 1, ins.data(), &o, &attrs};
  char buf[512] = {0};
  bp_error err{sizeof(err), buf, sizeof(buf)};
  ASSERT_EQ(p.fn[op][dispatch](p.ctx[op][dispatch], &call, &err), BP_STATUS_OK) << buf;
  EXPECT_TRUE(gaps_intact(out)) << "the kernel wrote outside the output's elements";
}

// f(index) for every index of `shape`, in row-major order.
std::vector<double> collect(const Shape& shape, const std::function<double(const Shape&)>& f) {
  std::vector<double> v;
  for_each_index(shape, [&](const Shape& i) { v.push_back(f(i)); });
  return v;
}

// Exact for every dtype but float32 (division and oneDNN's f32 arithmetic).
void expect_values(Buf& out, const std::vector<double>& want) {
  size_t k = 0;
  for_each_index(out.shape, [&](const Shape& i) {
    const double got = out.get(i), w = want[k++];
    const double tol = out.dtype == BP_DTYPE_FLOAT32 ? 1e-5 * std::max(1.0, std::abs(w)) : 0;
    if (std::abs(got - w) > tol)
      ADD_FAILURE() << "at flat index " << k - 1 << " got " << got << ", want " << w;
  });
}

const bp_dtype kAll[] = {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32,
                         BP_DTYPE_FLOAT64};
const Layout kDenseish[] = {Layout::contiguous, Layout::transposed, Layout::stepped,
                            Layout::offset};
const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset,
                           Layout::broadcast};
// Small shapes take the plugin's loops; the large one oneDNN and threads.
const Shape kShapes[] = {{3, 4, 5}, {}, {0, 4}, {7}, {300, 257}};

TEST(CpuOnednnPlugin, DescribesItself) {
  const LoadedPlugin& p = plugin();
  ASSERT_EQ(p.error, "");
  EXPECT_STREQ(p.plugin->name, "cpu_onednn");
  EXPECT_STREQ(p.plugin->version, "0.1.0");
  char reason[128] = {0};
  EXPECT_EQ(p.plugin->device_count(p.plugin->ctx, reason, sizeof(reason)), 1);
  bp_device_props props{};
  props.struct_size = sizeof(props);
  ASSERT_EQ(p.plugin->device_props(p.plugin->ctx, 0, &props, nullptr), BP_STATUS_OK);
  EXPECT_EQ(std::string(props.name).rfind("x86_64 CPU", 0), 0u) << props.name;
  EXPECT_GT(props.total_memory, 0u);
  EXPECT_EQ(props.host_addressable, 1);
  // The requested alignment is honoured: 16 for a small block, 64 for a large one.
  void* big = nullptr;
  ASSERT_EQ(p.plugin->allocate(p.plugin->ctx, 0, 4096, 64, &big, nullptr), BP_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  p.plugin->deallocate(p.plugin->ctx, 0, big, 4096);
  void* ptr = nullptr;
  ASSERT_EQ(p.plugin->allocate(p.plugin->ctx, 0, 100, 16, &ptr, nullptr), BP_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 16, 0u);
  bp_memory_stats stats{};
  stats.struct_size = sizeof(stats);
  ASSERT_EQ(p.plugin->memory_stats(p.plugin->ctx, 0, &stats, nullptr), BP_STATUS_OK);
  EXPECT_EQ(stats.allocated_bytes, 100u);
  EXPECT_GE(stats.num_allocs, 1u);
  p.plugin->deallocate(p.plugin->ctx, 0, ptr, 100);
  ASSERT_EQ(p.plugin->memory_stats(p.plugin->ctx, 0, &stats, nullptr), BP_STATUS_OK);
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(p.fn[BP_OP_ADD][BP_DTYPE_BOOL], nullptr);
  EXPECT_EQ(p.fn[BP_OP_DIV][BP_DTYPE_INT32], nullptr);
  EXPECT_NE(p.fn[BP_OP_MUL][BP_DTYPE_BOOL], nullptr);
}

TEST(CpuOnednnKernels, Fill) {
  for (bp_dtype d : kAll)
    for (const Shape& shape : kShapes)
      for (Layout l : kDenseish) {
        SCOPED_TRACE(str(layout_name(l), " dtype ", d));
        Buf out = make(d, shape, l);
        run(BP_OP_FILL, d, {}, out, attrs_with({fscalar(3.0)}));
        expect_values(out,
                      collect(shape, [&](const Shape&) { return d == BP_DTYPE_BOOL ? 1 : 3; }));
      }
}

double cast_to(bp_dtype to, double v) {
  if (to == BP_DTYPE_BOOL) return v != 0;
  if (!is_float(to)) return std::trunc(v);
  return to == BP_DTYPE_FLOAT32 ? double(float(v)) : v;
}

TEST(CpuOnednnKernels, CopyConvertsEveryPair) {
  for (bp_dtype from : kAll)
    for (bp_dtype to : kAll)
      for (const Shape& shape : kShapes)
        for (Layout li : kLayouts)
          for (Layout lo : {Layout::contiguous, Layout::transposed}) {
            SCOPED_TRACE(str(layout_name(li), "->", layout_name(lo), " ", from, "->", to));
            Buf in = make(from, shape, li, 1);
            Buf out = make(to, shape, lo, 2);
            run(BP_OP_COPY, from, {&in}, out, attrs_with({}));
            expect_values(out,
                          collect(shape, [&](const Shape& i) { return cast_to(to, in.get(i)); }));
          }
}

double binary_ref(bp_op op, bp_dtype d, double x, double y, double alpha) {
  if (op == BP_OP_ADD) return x + alpha * y;
  if (op == BP_OP_SUB) return x - alpha * y;
  if (op == BP_OP_MUL) return d == BP_DTYPE_BOOL ? double(x != 0 && y != 0) : x * y;
  return d == BP_DTYPE_FLOAT32 ? double(float(x) / float(y)) : x / y;
}

TEST(CpuOnednnKernels, Binary) {
  using L = Layout;
  const L cases[][3] = {
      // a, b, out
      {L::contiguous, L::contiguous, L::contiguous}, {L::transposed, L::contiguous, L::contiguous},
      {L::contiguous, L::stepped, L::contiguous},    {L::contiguous, L::broadcast, L::contiguous},
      {L::broadcast, L::contiguous, L::contiguous},  {L::offset, L::offset, L::offset},
      {L::transposed, L::transposed, L::transposed}, {L::stepped, L::broadcast, L::transposed}};
  for (bp_op op : {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV})
    for (bp_dtype d : kAll) {
      if (plugin().fn[op][d] == nullptr) continue;
      for (const Shape& shape : kShapes)
        for (const auto& c : cases)
          for (double alpha : {1.0, 2.0})
            for (bool inplace : {false, true}) {
              if ((alpha != 1 && (op == BP_OP_MUL || op == BP_OP_DIV)) || (inplace && c[0] != c[2]))
                continue;
              SCOPED_TRACE(str("op ", op, " dtype ", d, " ", layout_name(c[0]), ",",
                               layout_name(c[1]), "->", layout_name(c[2]), " alpha ", alpha,
                               inplace ? " in-place" : ""));
              Buf a = make(d, shape, c[0], 1);
              Buf b = make(d, shape, c[1], 2, op == BP_OP_DIV);
              Buf fresh = make(d, shape, c[2], 3);
              Buf& out = inplace ? a : fresh;
              const auto want = collect(shape, [&](const Shape& i) {
                return binary_ref(op, d, a.get(i), b.get(i), alpha);
              });
              const bp_attrs attrs =
                  alpha == 1 && op == BP_OP_ADD ? attrs_with({}) : attrs_with({fscalar(alpha)});
              run(op, d, {&a, &b}, out, attrs);
              expect_values(out, want);
            }
    }
}

TEST(CpuOnednnKernels, Relu) {
  for (bp_dtype d : {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
    for (const Shape& shape : kShapes)
      for (Layout li : kLayouts)
        for (bool inplace : {false, true}) {
          if (inplace && li == Layout::broadcast) continue;
          SCOPED_TRACE(str(layout_name(li), " dtype ", d, inplace ? " in-place" : ""));
          Buf in = make(d, shape, li, 1);
          Buf fresh = make(d, shape, Layout::contiguous, 2);
          Buf& out = inplace ? in : fresh;
          const auto want =
              collect(shape, [&](const Shape& i) { return std::max(in.get(i), 0.0); });
          run(BP_OP_RELU, d, {&in}, out, attrs_with({}));
          expect_values(out, want);
        }
}

TEST(CpuOnednnKernels, Sum) {
  const Shape cases[][2] = {// input shape, output shape
                            {{3, 4, 5}, {1, 4, 1}}, {{3, 4, 5}, {1, 1, 1}},  {{3, 4, 5}, {3, 4, 1}},
                            {{3, 4, 5}, {3, 4, 5}}, {{3, 1, 5}, {1, 1, 5}},  {{}, {}},
                            {{0, 4}, {1, 4}},       {{0, 4}, {1, 1}},        {{4, 0}, {4, 1}},
                            {{300, 257}, {1, 1}},   {{300, 257}, {1, 257}},  {{300, 257}, {300, 1}},
                            {{70000}, {1}},         {{2, 40000}, {1, 40000}}};
  for (bp_dtype d : kAll)
    for (const auto& c : cases)
      for (Layout li : kLayouts)
        for (Layout lo : {Layout::contiguous, Layout::stepped}) {
          SCOPED_TRACE(
              str(layout_name(li), "->", layout_name(lo), " dtype ", d, " rank ", c[0].size()));
          const bp_dtype od = is_float(d) ? d : BP_DTYPE_INT64;
          Buf in = make(d, c[0], li, 1);
          Buf out = make(od, c[1], lo, 2);
          Buf ref = make(BP_DTYPE_FLOAT64, c[1], Layout::contiguous);
          for_each_index(c[1], [&](const Shape& i) { ref.set(i, 0); });
          for_each_index(c[0], [&](const Shape& i) {
            Shape o = i;
            for (size_t k = 0; k < o.size(); ++k)
              if (c[1][k] == 1) o[k] = 0;
            ref.set(o, ref.get(o) + in.get(i));
          });
          run(BP_OP_SUM, d, {&in}, out, attrs_with({}));
          expect_values(out, collect(c[1], [&](const Shape& i) { return ref.get(i); }));
        }
}

TEST(CpuOnednnKernels, Matmul) {
  const int64_t cases[][4] = {// batch, m, k, n
                              {2, 3, 5, 4},   {1, 1, 1, 1},    {3, 7, 0, 2},    {2, 0, 3, 4},
                              {2, 9, 300, 5}, {3, 64, 96, 80}, {1, 64, 96, 80}, {1, 5, 4, 600}};
  for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
    for (const auto& c : cases)
      for (Layout la : kLayouts)
        for (Layout lb : kLayouts)
          for (Layout lo : {Layout::contiguous, Layout::transposed, Layout::stepped}) {
            if (la != lb && la != Layout::contiguous && lb != Layout::contiguous) continue;
            SCOPED_TRACE(str(layout_name(la), "@", layout_name(lb), "->", layout_name(lo),
                             " dtype ", d, " b", c[0], " m", c[1], " k", c[2], " n", c[3]));
            Buf a = make(d, {c[0], c[1], c[2]}, la, 1);
            Buf b = make(d, {c[0], c[2], c[3]}, lb, 2);
            Buf out = make(d, {c[0], c[1], c[3]}, lo, 3);
            run(BP_OP_MATMUL, d, {&a, &b}, out, attrs_with({}));
            expect_values(out, collect(out.shape, [&](const Shape& i) {
                            double want = 0;
                            for (int64_t p = 0; p < c[2]; ++p)
                              want += a.get({i[0], i[1], p}) * b.get({i[0], p, i[2]});
                            return want;
                          }));
          }
}

}  // namespace
