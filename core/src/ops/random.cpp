// rand and randn on the counter-based stream of BP_OP_RANDOM.
#include <backplane/ops.h>

#include <mutex>

#include "../internal.h"

namespace bp {

namespace {
std::mutex g_mu;
GeneratorState g_state{0, 0};

// Reserves `n` values of the stream; returns (seed, first offset).
GeneratorState take(int64_t n) {
  std::lock_guard lock(g_mu);
  GeneratorState s = g_state;
  g_state.offset += static_cast<uint64_t>(n);
  return s;
}

Tensor random(const char* name, int kind, IntArrayRef shape, TensorOptions options) {
  BP_CHECK_TYPE(is_floating(options.dtype_), "[", name,
                "] only floating dtypes are supported, got ", options.dtype_);
  Tensor out = empty(shape, options.requires_grad(false));
  if (out.numel() > 0) {
    const GeneratorState s = take(out.numel());
    bp_attrs attrs = detail::make_attrs();
    attrs.num_ints = 3;
    attrs.ints[0] = kind;
    attrs.ints[1] = static_cast<int64_t>(s.seed);
    attrs.ints[2] = static_cast<int64_t>(s.offset);
    Backend& b = detail::backend_of(out);
    const bp_tensor o = detail::abi_descriptor(out, b.dl_device_type());
    call_kernel(Op::Random, out.dtype(), out.device(), {}, {&o, 1}, attrs);
  }
  if (options.requires_grad_) out.requires_grad_(true);
  return out;
}
}  // namespace

void manual_seed(uint64_t seed) { set_generator_state({seed, 0}); }

GeneratorState generator_state() {
  std::lock_guard lock(g_mu);
  return g_state;
}

void set_generator_state(GeneratorState state) {
  std::lock_guard lock(g_mu);
  g_state = state;
}

Tensor rand(IntArrayRef shape, TensorOptions options) { return random("rand", 0, shape, options); }
Tensor randn(IntArrayRef shape, TensorOptions options) {
  return random("randn", 1, shape, options);
}

}  // namespace bp
