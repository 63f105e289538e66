// MATMUL over [..., m, k] @ [..., k, n] with broadcast batch dims (stride 0).
// Large float32 goes to oneDNN's matmul (which takes any strides and
// broadcasts batch dims of size 1); float64, which oneDNN does not support on
// CPU, and small or oddly strided problems run a register-blocked loop.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cpu_onednn.h"

namespace bp::cpu {

namespace {

// Rows of A sharing each loaded row of B, and columns per block: the
// accumulator block (kRowBlock x kColBlock) stays in L1.
constexpr int64_t kRowBlock = 4;
constexpr int64_t kColBlock = 256;

struct MatmulShape {
  int nd;
  int64_t m, n, k, batch;
};

// Element offsets of batch `bi` in a, b and out.
void batch_offsets(const MatmulShape& s, const TensorRef& out, const TensorRef& a,
                   const TensorRef& b, int64_t bi, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = s.nd - 3; d >= 0; --d) {
    const int64_t i = bi % out.size(d);
    bi /= out.size(d);
    off[0] += i * out.stride(d);
    off[1] += i * a.stride(d);
    off[2] += i * b.stride(d);
  }
}

template <class T>
void matmul_loop(const MatmulShape& s, const TensorRef& out, const TensorRef& a,
                 const TensorRef& b) {
  const int nd = s.nd;
  const int64_t som = out.stride(nd - 2), son = out.stride(nd - 1);
  const int64_t sam = a.stride(nd - 2), sak = a.stride(nd - 1);
  const int64_t sbk = b.stride(nd - 2), sbn = b.stride(nd - 1);
  const int64_t row_blocks = (s.m + kRowBlock - 1) / kRowBlock;
  const int64_t tasks = s.batch * row_blocks;
  auto body = [&](int64_t t0, int64_t t1) {
    T acc[kRowBlock][kColBlock];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t off[3];
      batch_offsets(s, out, a, b, t / row_blocks, off);
      const int64_t i0 = (t % row_blocks) * kRowBlock;
      const int64_t mi = std::min(kRowBlock, s.m - i0);
      T* o = out.data<T>() + off[0] + i0 * som;
      const T* x = a.data<T>() + off[1] + i0 * sam;
      const T* y = b.data<T>() + off[2];
      for (int64_t j0 = 0; j0 < s.n; j0 += kColBlock) {
        const int64_t nj = std::min(kColBlock, s.n - j0);
        for (int64_t r = 0; r < mi; ++r) std::fill(acc[r], acc[r] + nj, T(0));
        for (int64_t p = 0; p < s.k; ++p) {
          const T* brow = y + p * sbk + j0 * sbn;
          for (int64_t r = 0; r < mi; ++r) {
            const T av = x[r * sam + p * sak];
            T* ar = acc[r];
            if (sbn == 1) {
              for (int64_t j = 0; j < nj; ++j) ar[j] += av * brow[j];
            } else {
              for (int64_t j = 0; j < nj; ++j) ar[j] += av * brow[j * sbn];
            }
          }
        }
        for (int64_t r = 0; r < mi; ++r) {
          T* orow = o + r * som + j0 * son;
          for (int64_t j = 0; j < nj; ++j) orow[j * son] = acc[r][j];
        }
      }
    }
  };
  if (s.batch * s.m * s.n * s.k < kParallelMinElements * 16 || tasks < 2) {
    body(0, tasks);
  } else {
    parallel_ranges(tasks, body);
  }
}

// oneDNN wants real sizes: a broadcast batch dim becomes size 1, and the
// stride of every size-1 dim is made that of an outer dim so the layout
// reads as plain or transposed.
bool dnnl_layout(const TensorRef& t, int64_t* dims, int64_t* strides) {
  const int nd = t.ndim();
  int64_t span = 1;
  for (int d = 0; d < nd; ++d) {
    if (t.stride(d) < 0) return false;
    dims[d] = t.stride(d) == 0 && d < nd - 2 ? 1 : t.size(d);
    strides[d] = t.stride(d);
    if (dims[d] != 1) span = std::max(span, t.stride(d) * dims[d]);
  }
  for (int d = 0; d < nd; ++d)
    if (dims[d] == 1) strides[d] = span;
  for (int d = nd - 2; d < nd; ++d)
    if (dims[d] != 1 && strides[d] == 0) return false;  // broadcast rows or columns
  return true;
}

// A oneDNN memory object over a caller's buffer, created and destroyed
// through the C API (no std::vector of dims, no argument map per call).
class DnnlMemory {
 public:
  DnnlMemory(const dnnl_memory_desc_t* md, void* handle) {
    if (dnnl_memory_create(&m_, md, dnnl_engine().get(), handle) != dnnl_success) m_ = nullptr;
  }
  ~DnnlMemory() {
    if (m_) dnnl_memory_destroy(m_);
  }
  DnnlMemory(const DnnlMemory&) = delete;
  DnnlMemory& operator=(const DnnlMemory&) = delete;
  dnnl_memory_t get() const { return m_; }

 private:
  dnnl_memory_t m_ = nullptr;
};

// oneDNN's matmul for float32 operands it can describe. The memory
// descriptors are built only when the primitive is (a cache miss); a hit
// reads them back from the cached primitive's descriptor, so a call costs
// the key, the lookup, three memory objects and the execution.
bool try_dnnl_matmul(const TensorRef& out, const TensorRef& a, const TensorRef& b) {
  PrimitiveKey key{};
  key.kind = 4;
  key.dtype = BP_DTYPE_FLOAT32;
  key.ndim = out.ndim();
  const TensorRef* ops[3] = {&a, &b, &out};
  for (int i = 0; i < 3; ++i)
    if (!dnnl_layout(*ops[i], key.dims[i], key.strides[i])) return false;
  dnnl::primitive prim = cached_primitive(key, [&]() -> dnnl::primitive {
    dnnl::memory::desc mds[3];
    for (int i = 0; i < 3; ++i)
      mds[i] = dnnl::memory::desc(dnnl::memory::dims(key.dims[i], key.dims[i] + key.ndim),
                                  dnnl::memory::data_type::f32,
                                  dnnl::memory::dims(key.strides[i], key.strides[i] + key.ndim));
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mds[0], mds[1], mds[2]), dnnl_engine());
    if (is_reference_impl(pd)) return {};
    return dnnl::matmul(pd);
  });
  if (!prim) return false;
  const_dnnl_primitive_desc_t pd = nullptr;
  if (dnnl_primitive_get_primitive_desc(prim.get(), &pd) != dnnl_success) return false;
  const DnnlMemory src(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), a.base());
  const DnnlMemory wei(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), b.base());
  const DnnlMemory dst(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), out.base());
  if (!src.get() || !wei.get() || !dst.get()) return false;  // nothing written: the loop runs
  const dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, src.get()}, {DNNL_ARG_WEIGHTS, wei.get()}, {DNNL_ARG_DST, dst.get()}};
  const dnnl_status_t st = dnnl_primitive_execute(prim.get(), dnnl_stream().get(), 3, args);
  if (st != dnnl_success)
    throw std::runtime_error(std::string("[matmul] oneDNN's matmul failed (status ") +
                             std::to_string(st) + ")");
  return true;
}

template <class T>
void fill_zero(const MatmulShape& s, const TensorRef& out) {
  const int nd = s.nd;
  for (int64_t bi = 0; bi < s.batch; ++bi) {
    int64_t off[3];
    batch_offsets(s, out, out, out, bi, off);
    T* o = out.data<T>() + off[0];
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) o[i * out.stride(nd - 2) + j * out.stride(nd - 1)] = T(0);
  }
}

void matmul_kernel(const KernelCall& c) {
  const int64_t batch = check::matmul(c);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  const MatmulShape s{nd, out.size(nd - 2), out.size(nd - 1), a.size(nd - 1), batch};
  if (s.batch * s.m * s.n == 0) return;
  bp::sdk::visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (s.k == 0) return fill_zero<T>(s, out);
      if constexpr (std::is_same_v<T, float>) {
        if (s.batch * s.m * s.n * s.k >= kDnnlMinMatmulFlops && try_dnnl_matmul(out, a, b)) return;
      }
      matmul_loop<T>(s, out, a, b);
    } else {
      throw bp::sdk::Unsupported(std::string("[matmul] not implemented for ") +
                                 bp::sdk::dtype_name(out.dtype()));
    }
  });
}

}  // namespace

void register_matmul_kernels(Registrar& r) {
  r.add<&matmul_kernel>(BP_OP_MATMUL, {BP_DTYPE_FLOAT32, BP_DTYPE_FLOAT64}, BP_ORIGIN);
}

}  // namespace bp::cpu
