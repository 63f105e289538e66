// A plugin with fill and copy (every dtype, any strides, host memory), no
// add, and a float32 mul that handles contiguous operands only and declines
// (Unsupported) every other layout, as a vendor kernel might. With
// --fallback allow its adds, and its muls of strided views, run on the
// reference backend and are counted; with deny they fail naming the op.
#include "host_kernels.hpp"

namespace {

void mul_contiguous_f32(const bp::sdk::KernelCall& call) {
  const bp::sdk::TensorRef out = call.output(0), a = call.input(0), b = call.input(1);
  if (!out.is_contiguous() || !a.is_contiguous() || !b.is_contiguous() ||
      a.numel() != out.numel() || b.numel() != out.numel())
    throw bp::sdk::Unsupported("partial's mul takes contiguous operands of one shape only");
  float* o = out.data<float>();
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = x[i] * y[i];
}

class PartialPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "partial"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&mul_contiguous_f32>(BP_OP_MUL, {BP_DTYPE_FLOAT32}, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(PartialPlugin)
