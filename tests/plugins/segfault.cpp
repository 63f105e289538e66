// A plugin whose add kernel writes through a null pointer. Each conformance
// case that adds must fail with "killed by signal 11 (SIGSEGV)" while the
// run goes on.
#include "host_kernels.hpp"

namespace {

// Read through a volatile so the compiler cannot prove the pointer null and
// turn the store into a trap instruction (SIGILL) instead of a real fault.
int* volatile g_null = nullptr;

// The store is the point: keep UndefinedBehaviorSanitizer from reporting it
// first, so the case dies of SIGSEGV under the sanitizer builds too.
__attribute__((no_sanitize_undefined)) void add_segfaults(const bp::sdk::KernelCall&) {
  *g_null = 42;
}

class SegfaultPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "segfault"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_segfaults>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(SegfaultPlugin)
