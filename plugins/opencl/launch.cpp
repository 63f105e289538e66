// Launch helpers: the walk structs kernels take by value, argument setting,
// the enqueue itself, and scalar attributes as kernels read them.
#include <backplane/sdk/strided.hpp>
#include <cstring>
#include <unordered_map>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

Geo coalesced(const std::vector<TensorRef>& ops) {
  BP_SDK_REQUIRE(!ops.empty() && ops.size() <= 4, "a walk takes 1 to 4 operands");
  const TensorRef& out = ops[0];
  std::array<const int64_t*, 4> strides{};
  std::array<int64_t, 4> esize{};
  for (std::size_t k = 0; k < 4; ++k) {
    const TensorRef& t = ops[k < ops.size() ? k : 0];
    BP_SDK_REQUIRE(t.ndim() == out.ndim(), "operand " << k << " has " << t.ndim()
                                                      << " dims where the output has "
                                                      << out.ndim());
    strides[k] = t.strides();
    esize[k] = static_cast<int64_t>(bp::sdk::dtype_size(t.dtype()));
  }
  const auto L = bp::sdk::make_layout<4>(out.ndim(), out.shape(), strides, esize);
  Geo g;
  g.n = out.numel();
  g.ndim = L.ndim;
  for (int d = 0; d < L.ndim; ++d) {
    const int src = L.ndim - 1 - d;  // innermost first
    g.size[d] = L.shape[static_cast<std::size_t>(src)];
    for (std::size_t k = 0; k < 4; ++k) g.st[k][d] = L.strides[k][static_cast<std::size_t>(src)];
  }
  for (std::size_t k = 0; k < ops.size(); ++k)
    g.off[k] = static_cast<cl_long>(ops[k].raw().byte_offset);
  return g;
}

bool dense(const Geo& g, const std::vector<TensorRef>& ops) {
  if (g.ndim != 1) return false;
  for (std::size_t k = 0; k < ops.size(); ++k)
    if (g.st[k][0] != static_cast<cl_long>(bp::sdk::dtype_size(ops[k].dtype()))) return false;
  return true;
}

ProgramSpec variant(ProgramSpec spec, const Geo& g, const std::vector<TensorRef>& ops) {
  if (dense(g, ops)) spec.extra = "#define DENSE 1\n" + spec.extra;
  return spec;
}

Geo plain(int ndim, const int64_t* shape, const std::vector<const int64_t*>& strides,
          const std::vector<int64_t>& esize, const std::vector<int64_t>& offsets) {
  Geo g;
  g.n = 1;
  for (int d = 0; d < ndim; ++d) g.n *= shape[d];
  g.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    const int src = ndim - 1 - d;
    g.size[d] = shape[src];
    for (std::size_t k = 0; k < strides.size(); ++k) g.st[k][d] = strides[k][src] * esize[k];
  }
  if (ndim == 0) {
    g.ndim = 1;
    g.size[0] = 1;
  }
  for (std::size_t k = 0; k < offsets.size(); ++k) g.off[k] = offsets[k];
  return g;
}

int dim_attr(const KernelCall& c, int ndim) {
  BP_SDK_REQUIRE(c.attrs().num_ints >= 1, "the dim is ints[0]");
  const int64_t dim = c.attrs().ints[0];
  BP_SDK_REQUIRE(dim >= 0 && dim < std::max(ndim, 1),
                 "dim " << dim << " is out of range for " << ndim << " dims");
  return static_cast<int>(dim);
}

void Args::set(std::size_t n, const void* p) { BP_CL_CHECK(clSetKernelArg(k_, i_++, n, p)); }

std::size_t default_local(int32_t index) {
  return std::min<std::size_t>(256, device(index).max_work_group);
}

namespace {
// The largest work-group `k` can run with on `device` (a kernel using many
// registers may allow fewer than the device's maximum), cached per thread.
std::size_t kernel_limit(cl_kernel k, int32_t index) {
  thread_local std::unordered_map<cl_kernel, std::size_t> limits;
  auto it = limits.find(k);
  if (it != limits.end()) return it->second;
  std::size_t n = 0;
  BP_CL_CHECK(clGetKernelWorkGroupInfo(k, device(index).id, CL_KERNEL_WORK_GROUP_SIZE, sizeof n, &n,
                                       nullptr));
  limits.emplace(k, n);
  return n;
}
}  // namespace

std::size_t fit_local(cl_kernel k, int32_t index, std::size_t local) {
  // Halving keeps a power of two a power of two (the reductions' trees need it).
  const std::size_t limit = std::max<std::size_t>(kernel_limit(k, index), 1);
  while (local > limit) local /= 2;
  return local;
}

void launch(Stream& s, cl_kernel k, std::size_t items, std::size_t local) {
  if (items == 0) return;
  local = fit_local(k, s.device, local == 0 ? default_local(s.device) : local);
  const std::size_t global = (items + local - 1) / local * local;
  BP_CL_CHECK(clEnqueueNDRangeKernel(s.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  ++s.submitted;
}

cl_long scalar_bits(const bp_scalar& s, bp_dtype d) {
  const bool given_float = s.dtype == BP_DTYPE_FLOAT32 || s.dtype == BP_DTYPE_FLOAT64 ||
                           s.dtype == BP_DTYPE_FLOAT16 || s.dtype == BP_DTYPE_BFLOAT16;
  const double f = given_float ? s.value.f : static_cast<double>(s.value.i);
  switch (d) {
    case BP_DTYPE_FLOAT64: {
      cl_long bits;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
    case BP_DTYPE_FLOAT32:
    case BP_DTYPE_FLOAT16:
    case BP_DTYPE_BFLOAT16: {
      const float x = static_cast<float>(f);
      uint32_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      return static_cast<cl_long>(bits);
    }
    case BP_DTYPE_BOOL:
      return given_float ? (f != 0.0) : (s.value.i != 0);
    default:
      return given_float ? static_cast<cl_long>(f) : static_cast<cl_long>(s.value.i);
  }
}

}  // namespace bp::opencl

namespace bp::opencl {

bool any_fp64() {
  for (const Device& d : devices())
    if (d.fp64) return true;
  return false;
}

uint32_t dtype_mask(DtypeSet set) {
  uint32_t m = 0;
  for (int i = 0; i < BP_DTYPE_COUNT; ++i) {
    const auto d = static_cast<bp_dtype>(i);
    const bool floating = d == BP_DTYPE_FLOAT16 || d == BP_DTYPE_BFLOAT16 ||
                          d == BP_DTYPE_FLOAT32 || d == BP_DTYPE_FLOAT64;
    if (set == kFloating && !floating) continue;
    if (set == kNumeric && d == BP_DTYPE_BOOL) continue;
    if (d == BP_DTYPE_FLOAT64 && !any_fp64()) continue;
    m |= BP_DTYPE_BIT(d);
  }
  return m;
}

void check_dtype(int32_t index, bp_dtype d) {
  if (d == BP_DTYPE_FLOAT64 && !device(index).fp64)
    BP_SDK_UNSUPPORTED("float64 needs cl_khr_fp64, which " << device(index).name << " lacks");
}

}  // namespace bp::opencl
