// Loads the cpu_onednn plugin as the core would (dlopen + bp_plugin_init),
// and checks every kernel on contiguous, transposed, stepped, broadcast,
// offset, empty and 0-d descriptors against plain reference loops. Large
// cases take the oneDNN and multi-threaded paths, small ones the loops.
#include "plugin_harness.h"

namespace {

using namespace plugin_harness;

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
  ASSERT_EQ(p.plugin->allocate(p.plugin->ctx, 0, nullptr, 4096, 64, &big, nullptr), BP_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  p.plugin->deallocate(p.plugin->ctx, 0, nullptr, big, 4096);
  void* ptr = nullptr;
  ASSERT_EQ(p.plugin->allocate(p.plugin->ctx, 0, nullptr, 100, 16, &ptr, nullptr), BP_STATUS_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 16, 0u);
  bp_memory_stats stats{};
  stats.struct_size = sizeof(stats);
  ASSERT_EQ(p.plugin->memory_stats(p.plugin->ctx, 0, &stats, nullptr), BP_STATUS_OK);
  EXPECT_EQ(stats.allocated_bytes, 100u);
  EXPECT_GE(stats.num_allocs, 1u);
  p.plugin->deallocate(p.plugin->ctx, 0, nullptr, ptr, 100);
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
          for (double alpha : {1.0, 2.0, -3.0})  // two scales: one primitive, runtime values
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

// float32 ADD..DIV on each side of the plugin's thresholds: one thread below
// 32768 elements, OpenMP threads from there, oneDNN's binary primitive from
// 2^20 (cpu_onednn.h); dense and broadcast operands.
TEST(CpuOnednnKernels, BinaryOnBothSidesOfItsThresholds) {
  using L = Layout;
  const Shape shapes[] = {{32767}, {32768}, {1023, 1025}, {1024, 1025}};
  const L cases[][3] = {{L::contiguous, L::contiguous, L::contiguous},
                        {L::contiguous, L::broadcast, L::contiguous},
                        {L::transposed, L::contiguous, L::contiguous}};
  const bp_dtype d = BP_DTYPE_FLOAT32;
  for (bp_op op : {BP_OP_ADD, BP_OP_SUB, BP_OP_MUL, BP_OP_DIV})
    for (const Shape& shape : shapes)
      for (const auto& c : cases)
        for (double alpha : {1.0, 2.0}) {
          if (alpha != 1 && (op == BP_OP_MUL || op == BP_OP_DIV)) continue;
          SCOPED_TRACE(str("op ", op, " numel ", shape.size() == 1 ? shape[0] : shape[0] * shape[1],
                           " ", layout_name(c[0]), ",", layout_name(c[1]), " alpha ", alpha));
          Buf a = make(d, shape, c[0], 1);
          Buf b = make(d, shape, c[1], 2, op == BP_OP_DIV);
          Buf out = make(d, shape, c[2], 3);
          const auto want = collect(
              shape, [&](const Shape& i) { return binary_ref(op, d, a.get(i), b.get(i), alpha); });
          const bp_attrs attrs =
              alpha == 1 && op == BP_OP_ADD ? attrs_with({}) : attrs_with({fscalar(alpha)});
          run(op, d, {&a, &b}, out, attrs);
          expect_values(out, want);
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
