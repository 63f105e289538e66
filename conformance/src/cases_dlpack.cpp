// Memory shared with other libraries through DLPack (DV-9): what a
// consumer is given (device type, dtype, shape, strides, where the first
// element is, memory kept alive), and, for a plugin that declares
// import_memory (ABI 2.10), memory it did not allocate used as a tensor's
// storage and handed back once, after the last tensor over it and the work
// on it are gone.
#include <backplane/conformance.h>
#include <backplane/dlpack.h>
#include <dlpack/dlpack.h>

#include <vector>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "device";

// A DLManagedTensor over memory a case owns, counting its deleter's calls.
struct Owned {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  int released = 0;
  Owned(void* data, DLDevice device, std::vector<int64_t> shp, std::vector<int64_t> str,
        uint64_t byte_offset)
      : shape(std::move(shp)), strides(std::move(str)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = device;
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    t.strides = strides.data();
    t.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* m) { ++static_cast<Owned*>(m->manager_ctx)->released; };
  }
};

void dlpack_export(const Context& ctx) {
  const Backend& b = ctx.backend();
  const Device dev = ctx.device();
  const bool host = b.host_addressable(dev.index);
  Tensor base = from_vector(host_iota(24), {4, 6}, ctx.options());
  Tensor view = base.slice(0, 1, std::nullopt).slice(1, 2, 5);  // base[1:, 2:5]
  const auto [type, id] = dlpack_device(view);
  BP_EXPECT(type == (host ? kDLCPU : b.dl_device_type()), "dlpack_device gives type ", type,
            " for ", host ? "host-addressable" : "device", " memory of a plugin of type ",
            b.dl_device_type());
  BP_EXPECT(id == (host ? 0 : dev.index), "dlpack_device gives device ", id);
  DLManagedTensor* m = to_dlpack(view);
  const DLTensor& t = m->dl_tensor;
  BP_EXPECT(t.device.device_type == type && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 3 &&
                t.strides[0] == 6 && t.strides[1] == 1,
            "the export describes base[1:, 2:5] of a 4 x 6 tensor: device type ",
            t.device.device_type, ", shape ", IntArrayRef(t.shape, std::size_t(t.ndim)),
            ", strides ", IntArrayRef(t.strides, std::size_t(t.ndim)));
  BP_EXPECT(t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1,
            "float32 is DLPack's {2, 32, 1}");
  if (!dl::is_address_type(type))
    BP_EXPECT(t.byte_offset >= (6 + 2) * sizeof(float),
              "an opaque handle carries the view's offset (8 floats) in byte_offset, which is ",
              t.byte_offset);
  // The memory outlives the tensors until the consumer lets go.
  base = Tensor();
  view = Tensor();
  if (host) {
    const float* p = static_cast<const float*>(t.data);
    BP_EXPECT(t.byte_offset == 0 && p[0] == 8.0f && p[2 * 6 + 2] == 22.0f,
              "a host consumer's address is base[1][2]'s (8, and 22 at [2][2]), read after the "
              "tensors went: got ",
              p[0], " and ", p[2 * 6 + 2]);
  } else {
    BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, to_dlpack(zeros({2}, ctx.options()), kDLCPU)),
                       b.name(), "not host-addressable");
  }
  m->deleter(m);
}

void dlpack_import(const Context& ctx) {
  const Backend& b = ctx.backend();
  if (!b.imports_memory())
    BP_SKIP("the plugin declares no import_memory (ABI 2.10): from_dlpack is refused on it");
  const Device dev = ctx.device();
  if (b.dl_device_type() == kDLCPU) {
    // Host memory the case owns: a 3 x 2 column-major view two floats in.
    std::vector<float> data = {-1, -1, 0, 1, 2, 3, 4, 5};
    Owned own(data.data(), {kDLCPU, 0}, {3, 2}, {1, 3}, 2 * sizeof(float));
    {
      Tensor t = from_dlpack(&own.managed, dev);
      BP_EXPECT(t.device() == dev, "imported onto ", t.device(), ", not ", dev);
      BP_EXPECT_VALUES(t, {0, 3, 1, 4, 2, 5});
      Tensor col = t.select(1, 1);
      t = Tensor();
      col.mul_(full({3}, 2, ctx.options()));
      BP_EXPECT(own.released == 0, "given back while a view lives");
      BP_EXPECT_VALUES(col.sum(), {24});
    }
    BP_EXPECT(own.released == 1, "given back ", own.released, " times once the tensors went");
    BP_EXPECT(data == std::vector<float>({-1, -1, 0, 1, 2, 6, 8, 10}),
              "the owner's memory holds the in-place product");
    return;
  }
  // Memory of the plugin's own device type: its export of a tensor, which
  // the import must alias.
  Tensor base = from_vector(host_iota(12), {3, 4}, ctx.options());
  DLManagedTensor* m = to_dlpack(base.slice(0, 1, std::nullopt));
  int released = 0;
  struct Chain {
    DLManagedTensor* inner;
    int* count;
  } chain{m, &released};
  DLManagedTensor outer = *m;  // the same description, with a deleter that counts
  outer.manager_ctx = &chain;
  outer.deleter = [](DLManagedTensor* self) {
    auto* c = static_cast<Chain*>(self->manager_ctx);
    ++*c->count;
    c->inner->deleter(c->inner);
  };
  {
    Tensor t = from_dlpack(&outer, dev);
    BP_EXPECT_VALUES(t, {4, 5, 6, 7, 8, 9, 10, 11});
    t.zero_();
    BP_EXPECT_VALUES(base.sum(), {0 + 1 + 2 + 3});
    BP_EXPECT(released == 0, "given back while the tensor lives");
  }
  BP_EXPECT(released == 1, "given back ", released, " times once the tensor went");
  BP_EXPECT_VALUES(base, {0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0});
}

}  // namespace

void add_dlpack_cases(Suite& suite) {
  suite.add({"device.dlpack_export", {"DV-9"}, kCategory, dlpack_export});
  suite.add({"device.dlpack_import", {"DV-9"}, kCategory, dlpack_import});
}

}  // namespace bp::conformance
