// The kernel registry and dispatcher: the flat (op, backend, dtype) table,
// duplicate and malformed registrations, how a kernel's status becomes a
// typed error, the missing-kernel message, and that a call allocates nothing.
#include <backplane/backplane.h>
#include <backplane/debug.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

// Counts heap allocations, so a test can show a path allocates nothing.
namespace {
std::atomic<long> g_allocations{0};
}  // namespace

// Every replaceable form is replaced, so that no pair mixes ours with the
// runtime's (AddressSanitizer checks that each delete matches its new).
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// GCC pairs the replaced operator new with std::free and warns; they do
// belong together here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using bp::DType;
using bp::Op;

// A backend id no plugin uses in this program: the registry is indexed by
// id, and these tests only need table slots.
constexpr int kSpareBackend = bp::kMaxBackends - 1;

using bp::testing::message_of;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A kernel that records what it was called with and returns a chosen status.
struct Probe {
  int calls = 0;
  bp_kernel_call last{};
  double scalar1 = 0;  // the last call's scalars[1], when it had one
  bp_status result = BP_STATUS_OK;
  const char* message = nullptr;
};

bp_status probe_kernel(void* ctx, const bp_kernel_call* call, bp_error* error) {
  auto* p = static_cast<Probe*>(ctx);
  ++p->calls;
  p->last = *call;
  if (call->attrs->num_scalars > 1) p->scalar1 = call->attrs->scalars[1].value.f;
  if (p->message != nullptr) std::snprintf(error->message, error->capacity, "%s", p->message);
  return p->result;
}

bp_attrs no_attrs() {
  bp_attrs a{};
  a.struct_size = sizeof(a);
  return a;
}

bp_kernel_registration registration(Op op, uint32_t mask, void* ctx) {
  bp_kernel_registration r{};
  r.struct_size = sizeof(r);
  r.op = static_cast<int32_t>(op);
  r.dtype_mask = mask;
  r.fn = &probe_kernel;
  r.kernel_ctx = ctx;
  return r;
}

class KernelRegistryTest : public ::testing::Test {
 protected:
  void TearDown() override { bp::KernelRegistry::instance().remove_backend(kSpareBackend); }
  bp::KernelRegistry& registry = bp::KernelRegistry::instance();
};

TEST_F(KernelRegistryTest, LookupFindsExactlyTheRegisteredSlots) {
  Probe probe;
  registry.add(
      kSpareBackend,
      registration(Op::Mul, BP_DTYPE_BIT(BP_DTYPE_FLOAT32) | BP_DTYPE_BIT(BP_DTYPE_INT64), &probe),
      "test at dispatcher_test.cpp");
  for (DType d : {DType::Float32, DType::Int64}) {
    const bp::KernelEntry& e = registry.lookup(Op::Mul, kSpareBackend, d);
    EXPECT_EQ(e.fn, &probe_kernel);
    EXPECT_EQ(e.ctx, &probe);
    EXPECT_EQ(registry.origin(Op::Mul, kSpareBackend, d), "test at dispatcher_test.cpp");
  }
  // Neighbouring slots stay empty: other dtypes, other ops, other backends.
  EXPECT_EQ(registry.lookup(Op::Mul, kSpareBackend, DType::Float64).fn, nullptr);
  EXPECT_EQ(registry.lookup(Op::Add, kSpareBackend, DType::Float32).fn, nullptr);
  EXPECT_EQ(registry.lookup(Op::Mul, kSpareBackend - 1, DType::Int64).fn, nullptr);
  EXPECT_TRUE(registry.origin(Op::Add, kSpareBackend, DType::Float32).empty());
}

TEST_F(KernelRegistryTest, LookupIsAStableTableSlot) {
  // The same (op, backend, dtype) is always the same entry: a table, not a
  // search that builds its answer.
  const bp::KernelEntry* first = &registry.lookup(Op::Sub, kSpareBackend, DType::Float32);
  Probe probe;
  registry.add(kSpareBackend, registration(Op::Sub, BP_DTYPE_BIT(BP_DTYPE_FLOAT32), &probe), "t");
  EXPECT_EQ(&registry.lookup(Op::Sub, kSpareBackend, DType::Float32), first);
  EXPECT_EQ(first->fn, &probe_kernel);
  static_assert(
      noexcept(std::declval<const bp::KernelRegistry&>().lookup(Op::Add, 0, DType::Float32)));
}

TEST_F(KernelRegistryTest, RemoveBackendClearsOnlyThatBackend) {
  Probe probe;
  registry.add(kSpareBackend, registration(Op::Relu, BP_DTYPE_MASK_ALL, &probe), "t");
  registry.add(kSpareBackend - 1, registration(Op::Relu, BP_DTYPE_MASK_ALL, &probe), "t");
  registry.remove_backend(kSpareBackend);
  for (int d = 0; d < bp::kNumDTypes; ++d) {
    EXPECT_EQ(registry.lookup(Op::Relu, kSpareBackend, static_cast<DType>(d)).fn, nullptr);
    EXPECT_EQ(registry.lookup(Op::Relu, kSpareBackend - 1, static_cast<DType>(d)).fn,
              &probe_kernel);
  }
  registry.remove_backend(kSpareBackend - 1);
}

TEST_F(KernelRegistryTest, DuplicateNamesBothOriginsAndRegistersNothing) {
  Probe probe;
  registry.add(kSpareBackend, registration(Op::Add, BP_DTYPE_BIT(BP_DTYPE_FLOAT64), &probe),
               "first_plugin at a.cpp:10");
  const uint32_t overlapping = BP_DTYPE_BIT(BP_DTYPE_INT32) | BP_DTYPE_BIT(BP_DTYPE_FLOAT64);
  const std::string m = message_of<bp::ValueError>([&] {
    registry.add(kSpareBackend, registration(Op::Add, overlapping, &probe),
                 "second_plugin at b.cpp:20");
  });
  EXPECT_TRUE(contains(m, "first_plugin at a.cpp:10")) << m;
  EXPECT_TRUE(contains(m, "second_plugin at b.cpp:20")) << m;
  EXPECT_TRUE(contains(m, "add")) << m;
  EXPECT_TRUE(contains(m, "float64")) << m;
  // The refused registration left no half-registered dtype behind.
  EXPECT_EQ(registry.lookup(Op::Add, kSpareBackend, DType::Int32).fn, nullptr);
  EXPECT_EQ(registry.origin(Op::Add, kSpareBackend, DType::Float64), "first_plugin at a.cpp:10");
}

TEST_F(KernelRegistryTest, MalformedRegistrationsAreRefused) {
  Probe probe;
  bp_kernel_registration bad_op = registration(Op::Add, BP_DTYPE_MASK_ALL, &probe);
  bad_op.op = BP_OP_COUNT;
  EXPECT_TRUE(contains(
      message_of<bp::ValueError>([&] { registry.add(kSpareBackend, bad_op, "t"); }), "newer ABI"));
  bp_kernel_registration no_fn = registration(Op::Add, BP_DTYPE_MASK_ALL, &probe);
  no_fn.fn = nullptr;
  EXPECT_THROW(registry.add(kSpareBackend, no_fn, "t"), bp::ValueError);
  EXPECT_THROW(registry.add(kSpareBackend, registration(Op::Add, 0, &probe), "t"), bp::ValueError);
  EXPECT_THROW(
      registry.add(kSpareBackend, registration(Op::Add, 1u << BP_DTYPE_COUNT, &probe), "t"),
      bp::ValueError);
  // Ids are slot + kMaxBackends * generation and fit a Device's int16.
  EXPECT_THROW(registry.add(-1, registration(Op::Add, 1, &probe), "t"), bp::ValueError);
  EXPECT_THROW(registry.add(INT16_MAX + 1, registration(Op::Add, 1, &probe), "t"), bp::ValueError);
}

// --- call_kernel ------------------------------------------------------------

class CallKernelTest : public KernelRegistryTest {
 protected:
  void SetUp() override {
    registry.add(kSpareBackend, registration(Op::Div, BP_DTYPE_BIT(BP_DTYPE_FLOAT32), &probe), "t");
  }
  void call() {
    bp_attrs attrs = no_attrs();
    attrs.num_ints = 1;
    attrs.ints[0] = 77;
    bp::call_kernel(Op::Div, DType::Float32, device, {}, {}, attrs);
  }
  Probe probe;
  bp::Device device{static_cast<int16_t>(kSpareBackend), 0};
};

TEST_F(CallKernelTest, PassesTheCallThrough) {
  call();
  ASSERT_EQ(probe.calls, 1);
  EXPECT_EQ(probe.last.op, BP_OP_DIV);
  EXPECT_EQ(probe.last.dtype, BP_DTYPE_FLOAT32);
  EXPECT_EQ(probe.last.num_inputs, 0);
  EXPECT_EQ(probe.last.struct_size, sizeof(bp_kernel_call));
}

TEST_F(CallKernelTest, EachStatusBecomesItsTypedErrorWithTheMessage) {
  probe.message = "the kernel's own words";
  probe.result = BP_STATUS_INVALID_ARGUMENT;
  std::string m = message_of<bp::ValueError>([&] { call(); });
  EXPECT_EQ(m.rfind("[div]", 0), 0u) << m;
  EXPECT_TRUE(contains(m, "the kernel's own words")) << m;
  probe.result = BP_STATUS_UNSUPPORTED;
  EXPECT_THROW(call(), bp::NotImplementedError);
  probe.result = BP_STATUS_OUT_OF_MEMORY;
  EXPECT_THROW(call(), bp::OutOfMemoryError);
  probe.result = BP_STATUS_RUNTIME_ERROR;
  m = message_of<bp::Error>([&] { call(); });
  EXPECT_TRUE(contains(m, "the kernel's own words")) << m;
  // A failing kernel that writes no message still gives a readable error.
  probe.message = nullptr;
  m = message_of<bp::Error>([&] { call(); });
  EXPECT_TRUE(contains(m, "[div]")) << m;
  EXPECT_EQ(probe.calls, 5);
}

TEST_F(CallKernelTest, AllocatesNothing) {
  call();  // warm up anything lazily initialised
  const long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) call();
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(probe.calls, 101);
}

// --- the scalar form (BP_KERNEL_SCALAR_OPERAND) -------------------------------

class ScalarFormTest : public KernelRegistryTest {
 protected:
  void register_probe(uint32_t flags) {
    bp_kernel_registration r = registration(Op::Mul, BP_DTYPE_BIT(BP_DTYPE_FLOAT32), &probe);
    r.flags = flags;
    registry.add(kSpareBackend, r, "t");
  }
  bool call() {
    bp_attrs attrs = no_attrs();
    attrs.num_scalars = 2;
    attrs.scalars[0] = bp::Scalar(1).to_abi();
    attrs.scalars[1] = bp::Scalar(2.5).to_abi();
    const bp_tensor in{}, out{};
    return bp::call_kernel_scalar_form(Op::Mul, DType::Float32, device, in, out, attrs);
  }
  Probe probe;
  bp::Device device{static_cast<int16_t>(kSpareBackend), 0};
};

TEST_F(ScalarFormTest, OnlyAKernelFlaggedForItIsCalledInIt) {
  register_probe(0);
  EXPECT_FALSE(call());
  EXPECT_EQ(probe.calls, 0);
}

TEST_F(ScalarFormTest, TheCallHasOneInputAndTheScalarInSlotOne) {
  register_probe(BP_KERNEL_SCALAR_OPERAND);
  EXPECT_TRUE(call());
  ASSERT_EQ(probe.calls, 1);
  EXPECT_EQ(probe.last.op, BP_OP_MUL);
  EXPECT_EQ(probe.last.num_inputs, 1);
  EXPECT_EQ(probe.last.num_outputs, 1);
  EXPECT_EQ(probe.scalar1, 2.5);
}

TEST_F(ScalarFormTest, ADeclinedCallIsTheCallersAndAFailureThrows) {
  register_probe(BP_KERNEL_SCALAR_OPERAND);
  probe.result = BP_STATUS_UNSUPPORTED;
  EXPECT_FALSE(call());  // the caller makes the operand a tensor and calls again
  probe.result = BP_STATUS_INVALID_ARGUMENT;
  probe.message = "the kernel's own words";
  const std::string m = message_of<bp::ValueError>([&] { call(); });
  EXPECT_TRUE(contains(m, "[mul]") && contains(m, "the kernel's own words")) << m;
}

TEST(ScalarForm, AFlagBitSetBeforeTheAbiDefinedItIsCleared) {
  bp::Backend& b =
      bp::PluginLoader::instance().load(BACKPLANE_TEST_PLUGIN_DIR "/libbackplane_old_minor.so");
  const bp::KernelEntry& k = bp::KernelRegistry::instance().lookup(Op::Add, b.id(), DType::Float32);
  ASSERT_NE(k.fn, nullptr);
  EXPECT_EQ(k.flags & BP_KERNEL_SCALAR_OPERAND, 0u);
}

// --- missing kernels, with real backends -------------------------------------

TEST(MissingKernel, NamesOpDtypeBackendAndThatNoneHasIt) {
  bp::Backend& cpu = bp::PluginLoader::instance().load("cpu_onednn");
  const bp::Device dev{static_cast<int16_t>(cpu.id()), 0};
  // cpu_onednn has no integer matmul.
  const std::string m = message_of<bp::NotImplementedError>(
      [&] { bp::call_kernel(Op::Matmul, DType::Int32, dev, {}, {}, no_attrs()); });
  EXPECT_EQ(m.rfind("[matmul]", 0), 0u) << m;
  EXPECT_TRUE(contains(m, "int32")) << m;
  EXPECT_TRUE(contains(m, "'cpu_onednn'")) << m;
  EXPECT_TRUE(contains(m, "no loaded backend has it")) << m;
}

TEST(MissingKernel, NamesThePluginsFoundButNotLoaded) {
  bp::PluginLoader& loader = bp::PluginLoader::instance();
  bp::Backend& cpu = loader.load("cpu_onednn");
  bool sim_found = false;
  for (const std::string& dir : loader.search_dirs())
    sim_found = sim_found || std::filesystem::exists(dir + "/libbackplane_sim.so");
  bool sim_loaded = false;
  for (bp::Backend* b : loader.loaded()) sim_loaded = sim_loaded || b->name() == "sim";
  ASSERT_TRUE(sim_found) << "the build puts sim beside the tests' plugin folder";
  ASSERT_FALSE(sim_loaded) << "each test runs in a process of its own";
  const bp::Device dev{static_cast<int16_t>(cpu.id()), 0};
  const std::string m = message_of<bp::NotImplementedError>(
      [&] { bp::call_kernel(Op::Matmul, DType::Int32, dev, {}, {}, no_attrs()); });
  EXPECT_TRUE(contains(m, "no loaded backend has it (plugins found but not loaded, which may: "))
      << m;
  EXPECT_TRUE(contains(m, "sim")) << m;
  EXPECT_FALSE(contains(m, "may: cpu_onednn")) << m;
  EXPECT_FALSE(contains(m, ", cpu_onednn")) << m;
}

TEST(MissingKernel, NamesTheBackendsThatHaveIt) {
  bp::Backend& cpu = bp::PluginLoader::instance().load("cpu_onednn");
  bp::Backend& fake =
      bp::PluginLoader::instance().load(BACKPLANE_TEST_PLUGIN_DIR "/libbackplane_minimal.so");
  // minimal registers fill, copy and add for float32 only.
  bp::Tensor a = bp::ones({2}, bp::TensorOptions().device({static_cast<int16_t>(fake.id()), 0}));
  const std::string m = message_of<bp::NotImplementedError>([&] { (void)(a * a); });
  EXPECT_EQ(m.rfind("[mul]", 0), 0u) << m;
  EXPECT_TRUE(contains(m, "float32")) << m;
  EXPECT_TRUE(contains(m, "'minimal'")) << m;
  EXPECT_TRUE(contains(m, "backends that have it: cpu_onednn")) << m;

  // And the other way round: give minimal a kernel cpu_onednn lacks.
  static Probe probe;
  auto& registry = bp::KernelRegistry::instance();
  if (registry.lookup(Op::Matmul, fake.id(), DType::Int32).fn == nullptr)
    registry.add(fake.id(), registration(Op::Matmul, BP_DTYPE_BIT(BP_DTYPE_INT32), &probe), "t");
  const bp::Device cpu_dev{static_cast<int16_t>(cpu.id()), 0};
  const std::string m2 = message_of<bp::NotImplementedError>(
      [&] { bp::call_kernel(Op::Matmul, DType::Int32, cpu_dev, {}, {}, no_attrs()); });
  EXPECT_TRUE(contains(m2, "backends that have it: minimal")) << m2;
  EXPECT_EQ(registry.backends_with(Op::Add, DType::Float32).size(), 2u);
}

TEST(Dispatch, AddOutOnTheDefaultBackendAllocatesNothing) {
  bp::Tensor a = bp::full({4}, 1.5), b = bp::full({4}, 2.0), out = bp::empty({4});
  bp::add_out(out, a, b);  // warm up: the backend is loaded, caches filled
  const long before = g_allocations.load();
  for (int i = 0; i < 50; ++i) bp::add_out(out, a, b);
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>(4, 3.5f)));
}

}  // namespace

// --- recording the kernels reached (debug::KernelRecording) ------------------

TEST(KernelRecording, RecordsEachKernelOnceWhileItLivesOnItsThreadOnly) {
  bp::Tensor a = bp::full({4}, 1.5), b = bp::full({4}, 2.0), out = bp::empty({4});
  bp::add_out(out, a, b);  // before any recording: nothing to see
  std::vector<bp::debug::ReachedKernel> outer_seen, inner_seen;
  {
    bp::debug::KernelRecording outer;
    bp::add_out(out, a, b);
    bp::add_out(out, a, b);
    {
      bp::debug::KernelRecording inner;
      (void)bp::mul(a, b);
      inner_seen = inner.kernels();
    }
    std::thread other([&] {
      (void)bp::sub(a, b);  // another thread: not this recording's
    });
    other.join();
    outer_seen = outer.kernels();
  }
  bp::debug::KernelRecording after;
  (void)bp::neg(a);
  const std::string backend = a.impl()->storage->backend().name();
  using K = bp::debug::ReachedKernel;
  EXPECT_EQ(outer_seen, (std::vector<K>{{backend, "add", "float32"}}));
  EXPECT_EQ(inner_seen, (std::vector<K>{{backend, "mul", "float32"}}));
  const auto later = after.kernels();
  ASSERT_FALSE(later.empty());
  EXPECT_EQ(later.back(), (K{backend, "neg", "float32"}));
}

// A scalar operand on the default backend is an attribute of the kernel call
// (cpu_onednn takes the scalar form): no fill of a 0-d tensor, in or out of
// place. (Backward fills its seed gradient, so it runs unrecorded.)
TEST(KernelRecording, AScalarOperandReachesNoFill) {
  bp::Tensor a = bp::full({4}, 1.5).requires_grad_();
  std::vector<bp::debug::ReachedKernel> seen;
  bp::Tensor y;
  {
    bp::debug::KernelRecording rec;
    y = (a + 2.0) * 2 / 4 - 1;
    bp::Tensor z = y.detach().clone();
    z.add_(1).mul_(3).div_(2).sub_(0.5);
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>(4, 2.125f)));  // (0.75 + 1) * 3 / 2 - 0.5
    seen = rec.kernels();
  }
  for (const auto& k : seen) EXPECT_NE(k.op, "fill") << "a scalar became a filled tensor";
  for (const char* op : {"add", "mul", "div", "sub"})
    EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](const auto& k) { return k.op == op; }))
        << op;
  y.sum().backward();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>(4, 0.75f)));  // (1.5 + 2) * 2 / 4 - 1
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>(4, 0.5f)));
}
