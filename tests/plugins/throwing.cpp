// A plugin whose kernels throw C++ exceptions: add throws a plain
// std::runtime_error, mul an SDK InvalidArgument. The SDK must catch both at
// the boundary. div is registered raw (no SDK trampoline) and throws an int
// straight through the C ABI: the core must stop it. sub works, so a test
// can show the process goes on.
#include <stdexcept>

#include "fake_kernels.hpp"

namespace {

void add_throws(const bp::sdk::KernelCall&) {
  throw std::runtime_error("throwing plugin: add kernel failed on purpose");
}

void mul_rejects(const bp::sdk::KernelCall&) {
  throw bp::sdk::InvalidArgument("throwing plugin: mul refuses these operands");
}

bp_status div_throws_raw(void*, const bp_kernel_call*, bp_error*) { throw 42; }

void sub_f32(const bp::sdk::KernelCall& call) {
  const float alpha = bp::sdk::scalar_as<float>(call.scalar(0));
  bp::sdk::for_each_row<3>({call.output(0), call.input(0), call.input(1)},
                           [&](auto p, auto s, int64_t n) {
                             for (int64_t i = 0; i < n; ++i)
                               *reinterpret_cast<float*>(p[0] + i * s[0]) =
                                   *reinterpret_cast<const float*>(p[1] + i * s[1]) -
                                   alpha * *reinterpret_cast<const float*>(p[2] + i * s[2]);
                           });
}

class ThrowingPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "throwing"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_basic(r);
    r.add<&add_throws>(BP_OP_ADD, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add<&mul_rejects>(BP_OP_MUL, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add<&sub_f32>(BP_OP_SUB, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
    r.add_raw(BP_OP_DIV, BP_DTYPE_BIT(BP_DTYPE_FLOAT32), &div_throws_raw, nullptr, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(ThrowingPlugin)
