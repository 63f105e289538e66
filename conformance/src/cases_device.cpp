// Devices and backends: to() copies unless nothing changes and ops never
// mix devices (DV-1); a missing kernel is a NotImplementedError naming op,
// dtype and backend (DV-2); memory is read only through the backend's
// copies, so every tensor is readable on the host (DV-3). The second
// device is the reference CPU backend; with only one backend those cases
// are skipped.
#include <backplane/conformance.h>
#include <backplane/fallback.h>

#include <limits>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "device";

// DV-1: nothing to change, nothing copied: to() returns self.
void to_same_returns_self(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  BP_EXPECT(x.to(ctx.device()).is_same(x), "to(its own device) must return self");
  BP_EXPECT(x.to(DType::Float32).is_same(x), "to(its own dtype) must return self");
  BP_EXPECT(x.to(ctx.device(), DType::Float32).is_same(x));
  Tensor v = x.t();
  BP_EXPECT(v.to(ctx.device()).is_same(v), "a view is returned as is, not made contiguous");
}

// DV-1: another dtype is a copy with converted values.
void to_dtype_copies(const Context& ctx) {
  Tensor x = from_vector(std::vector<double>{1.5, -2.5, 3.9, 0}, {4}, ctx.options());
  Tensor d = x.to(DType::Float64);
  BP_EXPECT(!d.shares_storage(x), "to(another dtype) must copy");
  BP_EXPECT_EQ(d.dtype(), DType::Float64);
  BP_EXPECT_EQ(d.device(), ctx.device());
  BP_EXPECT_VALUES(d, {1.5, -2.5, 3.9f, 0});  // 3.9 went through float32 first
  // Floating to integer truncates toward zero; anything to bool is != 0.
  BP_EXPECT_VALUES(x.to(DType::Int32), {1, -2, 3, 0});
  BP_EXPECT_VALUES(x.to(DType::Int64), {1, -2, 3, 0});
  BP_EXPECT_VALUES(x.to(DType::Bool), {1, 1, 1, 0});
  d.fill_(7);
  BP_EXPECT_VALUES(x, {1.5, -2.5, 3.9f, 0});  // the copy is independent
  Tensor t = iota(ctx, {2, 3}, DType::Int64).t();
  Tensor tf = t.to(DType::Float32);
  BP_EXPECT_SHAPE(tf, {3, 2});
  BP_EXPECT_VALUES(tf, {0, 3, 1, 4, 2, 5});
  BP_EXPECT(!tf.shares_storage(t));
}

// DV-1: another device is a copy there; back again gives the same values.
void to_other_device_copies(const Context& ctx) {
  const Device other = second_device(ctx);
  Tensor x = iota(ctx, {2, 3});
  Tensor y = x.to(other);
  BP_EXPECT_EQ(y.device(), other);
  BP_EXPECT(!y.shares_storage(x));
  BP_EXPECT_EQ(y.dtype(), DType::Float32);
  BP_EXPECT_VALUES(y, {0, 1, 2, 3, 4, 5});
  Tensor back = y.to(ctx.device());
  BP_EXPECT_EQ(back.device(), ctx.device());
  BP_EXPECT_VALUES(back, {0, 1, 2, 3, 4, 5});
  Tensor z = x.t().to(other, DType::Float64);  // a non-contiguous source, a new dtype
  BP_EXPECT_EQ(z.device(), other);
  BP_EXPECT_EQ(z.dtype(), DType::Float64);
  BP_EXPECT_VALUES(z, {0, 3, 1, 4, 2, 5});
  y.fill_(-1);
  BP_EXPECT_VALUES(x, {0, 1, 2, 3, 4, 5});
}

// DV-1: no implicit transfer: mixing devices is an error naming both.
void mixed_devices_refused(const Context& ctx) {
  const Device other = second_device(ctx);
  Tensor a = iota(ctx, {2, 2});
  Tensor b = iota(ctx, {2, 2}).to(other);
  const std::string here = to_string(ctx.device()), there = to_string(other);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, add(a, b)), here, there);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, a.add_(b)), here, there);
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, matmul(b, a)), here, there);
  BP_EXPECT_THROWS(a * b, ValueError);
  BP_EXPECT_THROWS(where(full({2, 2}, true, ctx.options(DType::Bool)), a, b), ValueError);
  BP_EXPECT_THROWS(a.gather(1, zeros({2, 1}, TensorOptions(DType::Int64).device(other))),
                   ValueError);
  BP_EXPECT_VALUES(a, {0, 1, 2, 3});  // a refused op changes nothing
}

// Restores the fallback policy on scope exit.
class DenyFallback {
 public:
  DenyFallback() : saved_(fallback_policy()) { set_fallback_policy(FallbackPolicy::Deny); }
  ~DenyFallback() { set_fallback_policy(saved_); }

 private:
  FallbackPolicy saved_;
};

// DV-2: an op no backend has for a dtype (matmul of bool) is a
// NotImplementedError naming op, dtype and backend.
void missing_op_not_implemented(const Context& ctx) {
  DenyFallback deny;
  Tensor a = full({2, 2}, true, ctx.options(DType::Bool));
  std::string msg;
  try {
    (void)matmul(a, a);
    BP_SKIP("this backend implements matmul for bool; the case needs an op it lacks");
  } catch (const NotImplementedError& e) {
    msg = e.what();
  }
  BP_EXPECT_MENTIONS(msg, "matmul", "bool", ctx.backend().name());
  BP_EXPECT_VALUES(a, {1, 1, 1, 1});
}

// DV-3: values round-trip exactly through the device, extremes included.
void values_round_trip(const Context& ctx) {
  const std::vector<int32_t> i32 = {std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max(), 0, -1, 7};
  BP_EXPECT_EQ(from_vector(i32, {5}, ctx.options(DType::Int32)).to_vector<int32_t>(), i32);
  const std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max(), (int64_t{1} << 53) + 1,
                                    -3};
  BP_EXPECT_EQ(from_vector(i64, {2, 2}, ctx.options(DType::Int64)).to_vector<int64_t>(), i64);
  const std::vector<float> f32 = {1.5f, -0.1f, std::numeric_limits<float>::max(),
                                  std::numeric_limits<float>::denorm_min(), 1e-30f};
  BP_EXPECT_EQ(from_vector(f32, {5}, ctx.options(DType::Float32)).to_vector<float>(), f32);
  const std::vector<double> f64 = {1.0 / 3, -1e300, std::numeric_limits<double>::denorm_min(), 0.1,
                                   2.5};
  BP_EXPECT_EQ(from_vector(f64, {5}, ctx.options(DType::Float64)).to_vector<double>(), f64);
  const std::vector<bool> b = {true, false, false, true};
  BP_EXPECT_EQ(from_vector(b, {4}, ctx.options(DType::Bool)).to_vector<bool>(), b);
  Tensor s = full({}, int64_t{-5}, ctx.options(DType::Int64));
  BP_EXPECT_EQ(s.item<int64_t>(), -5);
}

// DV-3: the core reads device memory only through the backend's copies, so
// any tensor reads on the host whether or not the memory is host addressable.
void readable_without_host_access(const Context& ctx) {
  Tensor x = iota(ctx, {3, 4});
  Tensor v = x.t().narrow(0, 1, 2);  // [2, 3], strides [1, 4], offset 1
  BP_EXPECT_VALUES(v, {1, 5, 9, 2, 6, 10});
  BP_EXPECT_EQ(v.to_vector<int64_t>(), (std::vector<int64_t>{1, 5, 9, 2, 6, 10}));
  BP_EXPECT_EQ(x[2][3].item<double>(), 11.0);
  const std::string text = v.to_string();
  BP_EXPECT(text.find("tensor(") == 0, "to_string() gave: ", text,
            " (host addressable: ", ctx.backend().host_addressable(ctx.device().index), ")");
  BP_EXPECT_MENTIONS(text, "9", "10");
}

}  // namespace

void add_device_cases(Suite& suite) {
  auto add = [&suite](const char* name, const char* id, void (*fn)(const Context&)) {
    suite.add({std::string("device.") + name, {id}, kCategory, fn});
  };
  add("to.same_returns_self", "DV-1", to_same_returns_self);
  add("to.dtype_copies", "DV-1", to_dtype_copies);
  add("to.other_device_copies", "DV-1", to_other_device_copies);
  add("mixed_devices_refused", "DV-1", mixed_devices_refused);
  add("missing_op_not_implemented", "DV-2", missing_op_not_implemented);
  add("values_round_trip", "DV-3", values_round_trip);
  add("readable_without_host_access", "DV-3", readable_without_host_access);
}

}  // namespace bp::conformance
