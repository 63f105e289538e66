// A plugin whose add leaves the first element of every row of its result
// unwritten (rows of more than one element); fill and copy are correct.
// `backplane fuzz --poison` must report the element as unwritten-result.
#include "host_kernels.hpp"

namespace {

void add_skipping_first(const bp::sdk::KernelCall& call) {
  bp::sdk::visit_dtype(call.output(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw bp::sdk::Unsupported("add is not defined for bool");
    } else {
      const T alpha = bp::sdk::scalar_as<T>(call.scalar(0));
      bp::sdk::for_each_row<3>(
          {call.output(0), call.input(0), call.input(1)}, [&](auto p, auto s, int64_t n) {
            for (int64_t i = n > 1 ? 1 : 0; i < n; ++i)
              bp::fake::at<T>(p[0], s[0], i) = static_cast<T>(
                  bp::fake::at<T>(p[1], s[1], i) + alpha * bp::fake::at<T>(p[2], s[2], i));
          });
    }
  });
}

class UnwrittenAddPlugin final : public bp::sdk::Plugin {
 public:
  const char* name() const override { return "unwritten_add"; }
  void register_kernels(bp::sdk::Registrar& r) override {
    bp::fake::register_fill_and_copy(r);
    r.add<&add_skipping_first>(BP_OP_ADD, bp::fake::kNumericDTypes, BP_ORIGIN);
  }
};

}  // namespace

BP_SDK_PLUGIN(UnwrittenAddPlugin)
