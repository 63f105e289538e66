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

size_t dtype_bytes(bp_dtype d) { return d == BP_DTYPE_BOOL ? 1 : d == BP_DTYPE_INT64 || d == BP_DTYPE_FLOAT64 ? 8 : 4; }
bool is_float(bp_dtype d) { return d == BP_DTYPE_FLOAT32 || d == BP_DTYPE_FLOAT64; }

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
    char* p = at(idx);
    switch (dtype) {
      case BP_DTYPE_BOOL: return *reinterpret_cast<uint8_t*>(p);
      case BP_DTYPE_INT32: return *reinterpret_cast<int32_t*>(p);
      case BP_DTYPE_INT64: return double(*reinterpret_cast<int64_t*>(p));
      case BP_DTYPE_FLOAT32: return *reinterpret_cast<float*>(p);
      default: return *reinterpret_cast<double*>(p);
    }
  }
  void set(const Shape& idx, double v) {
    char* p = at(idx);
    switch (dtype) {
      case BP_DTYPE_BOOL: *reinterpret_cast<uint8_t*>(p) = v != 0; break;
      case BP_DTYPE_INT32: *reinterpret_cast<int32_t*>(p) = int32_t(v); break;
      case BP_DTYPE_INT64: *reinterpret_cast<int64_t*>(p) = int64_t(v); break;
      case BP_DTYPE_FLOAT32: *reinterpret_cast<float*>(p) = float(v); break;
      default: *reinterpret_cast<double*>(p) = v; break;
    }
  }
  const bp_tensor& desc() {
    const bp_dl_dtype dl[] = {{6, 8, 1}, {0, 32, 1}, {0, 64, 1}, {2, 32, 1}, {2, 64, 1}};
    t = bp_tensor{storage.data(), {1, 0}, int32_t(shape.size()), dl[dtype], shape.data(),
                  strides.data(), uint64_t(offset * dtype_bytes(dtype))};
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

// Element slots that `b` does not address, as raw bytes, to detect stray writes.
std::vector<uint8_t> gaps(Buf& b) {
  std::vector<uint8_t> mask(b.storage.size() * 8, 1);
  const size_t es = dtype_bytes(b.dtype);
  for_each_index(b.shape, [&](const Shape& idx) {
    const size_t off = size_t(b.at(idx) - reinterpret_cast<char*>(b.storage.data()));
    for (size_t k = 0; k < es; ++k) mask[off + k] = 0;
  });
  std::vector<uint8_t> out(mask.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(b.storage.data());
  for (size_t k = 0; k < mask.size(); ++k) out[k] = mask[k] ? bytes[k] : 0;
  return out;
}

bp_attrs attrs_with(std::vector<bp_scalar> scalars) {
  bp_attrs a{};
  a.struct_size = sizeof(a);
  a.num_scalars = int32_t(scalars.size());
  for (size_t i = 0; i < scalars.size(); ++i) a.scalars[i] = scalars[i];
  return a;
}
bp_scalar fscalar(double v) { return bp_scalar{BP_DTYPE_FLOAT64, 0, {v}}; }

// Runs one kernel; checks it succeeded and left the output's gaps alone.
void run(bp_op op, bp_dtype dispatch, std::vector<Buf*> in, Buf& out, const bp_attrs& attrs) {
  const LoadedPlugin& p = plugin();
  ASSERT_EQ(p.error, "");
  ASSERT_NE(p.fn[op][dispatch], nullptr) << "op " << op << " dtype " << dispatch;
  std::vector<bp_tensor> ins;
  for (Buf* b : in) ins.push_back(b->desc());
  const bp_tensor o = out.desc();
  const auto before = gaps(out);
  bp_kernel_call call{sizeof(call), op, dispatch, int32_t(ins.size()), 1, ins.data(), &o, &attrs};
  char buf[512] = {0};
  bp_error err{sizeof(err), buf, sizeof(buf)};
  ASSERT_EQ(p.fn[op][dispatch](p.ctx[op][dispatch], &call, &err), BP_STATUS_OK) << buf;
  EXPECT_EQ(gaps(out), before) << "the kernel wrote outside the output's elements";
}

void expect_near(double got, double want, bp_dtype d, const Shape& idx) {
  const double tol = d == BP_DTYPE_FLOAT32 ? 1e-5 * std::max(1.0, std::abs(want)) : 0;
  if (std::abs(got - want) > tol || std::isnan(got) != std::isnan(want)) {
    std::string s;
    for (int64_t i : idx) s += std::to_string(i) + ",";
    ADD_FAILURE() << "at [" << s << "] got " << got << ", want " << want;
  }
}

const bp_dtype kAll[] = {BP_DTYPE_BOOL, BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32,
                         BP_DTYPE_FLOAT64};
const Layout kDenseish[] = {Layout::contiguous, Layout::transposed, Layout::stepped,
                            Layout::offset};
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
  void* ptr = nullptr;
  ASSERT_EQ(p.plugin->allocate(p.plugin->ctx, 0, 100, 16, &ptr, nullptr), BP_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 64, 0u);
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
        SCOPED_TRACE(std::string(layout_name(l)) + " dtype " + std::to_string(d));
        Buf out = make(d, shape, l);
        run(BP_OP_FILL, d, {}, out, attrs_with({fscalar(3.0)}));
        for_each_index(shape, [&](const Shape& i) { expect_near(out.get(i), d == BP_DTYPE_BOOL ? 1 : 3, d, i); });
      }
}

double cast_to(bp_dtype to, double v) {
  if (to == BP_DTYPE_BOOL) return v != 0;
  if (!is_float(to)) return std::trunc(v);
  return to == BP_DTYPE_FLOAT32 ? double(float(v)) : v;
}

TEST(CpuOnednnKernels, CopyConvertsEveryPair) {
  const Layout kIn[] = {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset,
                        Layout::broadcast};
  for (bp_dtype from : kAll)
    for (bp_dtype to : kAll)
      for (const Shape& shape : kShapes)
        for (Layout li : kIn)
          for (Layout lo : {Layout::contiguous, Layout::transposed}) {
            SCOPED_TRACE(std::string(layout_name(li)) + "->" + layout_name(lo) + " " +
                         std::to_string(from) + "->" + std::to_string(to));
            Buf in = make(from, shape, li, 1);
            Buf out = make(to, shape, lo, 2);
            run(BP_OP_COPY, from, {&in}, out, attrs_with({}));
            for_each_index(shape, [&](const Shape& i) { expect_near(out.get(i), cast_to(to, in.get(i)), to, i); });
          }
}

double binary_ref(bp_op op, bp_dtype d, double x, double y, double alpha) {
  switch (op) {
    case BP_OP_ADD: return x + alpha * y;
    case BP_OP_SUB: return x - alpha * y;
    case BP_OP_MUL: return d == BP_DTYPE_BOOL ? double(x != 0 && y != 0) : x * y;
    default: return d == BP_DTYPE_FLOAT32 ? double(float(x) / float(y)) : x / y;
  }
}

TEST(CpuOnednnKernels, Binary) {
  struct Case { Layout a, b, out; };
  const Case cases[] = {
      {Layout::contiguous, Layout::contiguous, Layout::contiguous},
      {Layout::transposed, Layout::contiguous, Layout::contiguous},
      {Layout::contiguous, Layout::stepped, Layout::contiguous},
      {Layout::contiguous, Layout::broadcast, Layout::contiguous},
      {Layout::broadcast, Layout::contiguous, Layout::contiguous},
      {Layout::offset, Layout::offset, Layout::offset},
      {Layout::transposed, Layout::transposed, Layout::transposed},
      {Layout::stepped, Layout::broadcast, Layout::transposed},
  };
  for (bp_op op : {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV})
    for (bp_dtype d : kAll) {
      if (plugin().fn[op][d] == nullptr) continue;
      for (const Shape& shape : kShapes)
        for (const Case& c : cases)
          for (double alpha : {1.0, 2.0})
            for (bool inplace : {false, true}) {
              if ((alpha != 1 && (op == BP_OP_MUL || op == BP_OP_DIV)) ||
                  (inplace && c.a != c.out))
                continue;
              SCOPED_TRACE("op " + std::to_string(op) + " dtype " + std::to_string(d) + " " +
                           layout_name(c.a) + "," + layout_name(c.b) + "->" +
                           layout_name(c.out) + " alpha " + std::to_string(alpha) +
                           (inplace ? " in-place" : ""));
              Buf a = make(d, shape, c.a, 1);
              Buf b = make(d, shape, c.b, 2, op == BP_OP_DIV);
              Buf fresh = make(d, shape, c.out, 3);
              Buf& out = inplace ? a : fresh;
              std::vector<double> want;
              for_each_index(shape, [&](const Shape& i) {
                want.push_back(binary_ref(op, d, a.get(i), b.get(i), alpha));
              });
              const bp_attrs attrs = alpha == 1 && op == BP_OP_ADD
                                         ? attrs_with({})
                                         : attrs_with({fscalar(alpha)});
              run(op, d, {&a, &b}, out, attrs);
              size_t k = 0;
              for_each_index(shape, [&](const Shape& i) { expect_near(out.get(i), want[k++], d, i); });
            }
    }
}

TEST(CpuOnednnKernels, Relu) {
  for (bp_dtype d : {BP_DTYPE_INT32, BP_DTYPE_INT64, BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
    for (const Shape& shape : kShapes)
      for (Layout li : {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset,
                        Layout::broadcast})
        for (bool inplace : {false, true}) {
          if (inplace && li == Layout::broadcast) continue;
          SCOPED_TRACE(std::string(layout_name(li)) + " dtype " + std::to_string(d));
          Buf in = make(d, shape, li, 1);
          Buf fresh = make(d, shape, Layout::contiguous, 2);
          Buf& out = inplace ? in : fresh;
          std::vector<double> want;
          for_each_index(shape, [&](const Shape& i) { want.push_back(std::max(in.get(i), 0.0)); });
          run(BP_OP_RELU, d, {&in}, out, attrs_with({}));
          size_t k = 0;
          for_each_index(shape, [&](const Shape& i) { expect_near(out.get(i), want[k++], d, i); });
        }
}

TEST(CpuOnednnKernels, Sum) {
  struct Case { Shape in, out; };
  const Case cases[] = {
      {{3, 4, 5}, {1, 4, 1}}, {{3, 4, 5}, {1, 1, 1}}, {{3, 4, 5}, {3, 4, 1}},
      {{3, 4, 5}, {3, 4, 5}}, {{3, 1, 5}, {1, 1, 5}}, {{}, {}},
      {{0, 4}, {1, 4}},       {{0, 4}, {1, 1}},       {{4, 0}, {4, 1}},
      {{300, 257}, {1, 1}},   {{300, 257}, {1, 257}}, {{300, 257}, {300, 1}},
      {{70000}, {1}},         {{2, 40000}, {1, 40000}},
  };
  for (bp_dtype d : kAll)
    for (const Case& c : cases)
      for (Layout li : {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset,
                        Layout::broadcast})
        for (Layout lo : {Layout::contiguous, Layout::stepped}) {
          SCOPED_TRACE(std::string(layout_name(li)) + "->" + layout_name(lo) + " dtype " +
                       std::to_string(d) + " rank " + std::to_string(c.in.size()));
          const bp_dtype od = is_float(d) ? d : BP_DTYPE_INT64;
          Buf in = make(d, c.in, li, 1);
          Buf out = make(od, c.out, lo, 2);
          Buf ref = make(BP_DTYPE_FLOAT64, c.out, Layout::contiguous);
          for_each_index(c.out, [&](const Shape& i) { ref.set(i, 0); });
          for_each_index(c.in, [&](const Shape& i) {
            Shape o = i;
            for (size_t k = 0; k < o.size(); ++k)
              if (c.out[k] == 1) o[k] = 0;
            ref.set(o, ref.get(o) + in.get(i));
          });
          run(BP_OP_SUM, d, {&in}, out, attrs_with({}));
          for_each_index(c.out, [&](const Shape& i) { expect_near(out.get(i), ref.get(i), od, i); });
        }
}

TEST(CpuOnednnKernels, Matmul) {
  struct Case { int64_t batch, m, k, n; };
  const Case cases[] = {{2, 3, 5, 4}, {1, 1, 1, 1}, {3, 7, 0, 2},   {2, 0, 3, 4},
                        {2, 9, 300, 5}, {3, 64, 96, 80}, {1, 5, 4, 600}};
  const Layout kOps[] = {Layout::contiguous, Layout::transposed, Layout::stepped, Layout::offset,
                         Layout::broadcast};
  for (bp_dtype d : {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64})
    for (const Case& c : cases)
      for (Layout la : kOps)
        for (Layout lb : kOps)
          for (Layout lo : {Layout::contiguous, Layout::transposed, Layout::stepped}) {
            if (la != lb && la != Layout::contiguous && lb != Layout::contiguous) continue;
            SCOPED_TRACE(std::string(layout_name(la)) + "@" + layout_name(lb) + "->" +
                         layout_name(lo) + " dtype " + std::to_string(d) + " m" +
                         std::to_string(c.m) + " k" + std::to_string(c.k) + " n" +
                         std::to_string(c.n));
            Buf a = make(d, {c.batch, c.m, c.k}, la, 1);
            Buf b = make(d, {c.batch, c.k, c.n}, lb, 2);
            Buf out = make(d, {c.batch, c.m, c.n}, lo, 3);
            run(BP_OP_MATMUL, d, {&a, &b}, out, attrs_with({}));
            for_each_index({c.batch, c.m, c.n}, [&](const Shape& i) {
              double want = 0;
              for (int64_t p = 0; p < c.k; ++p) want += a.get({i[0], i[1], p}) * b.get({i[0], p, i[2]});
              expect_near(out.get(i), want, d, i);
            });
          }
}

}  // namespace
