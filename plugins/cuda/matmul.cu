// MATMUL on cuBLAS (strided-batched sgemm/dgemm, 64-bit API), in plain FP32
// and FP64: the default math mode, so no TF32 rounding.
//
// cuBLAS is column-major; a row-major matrix is its transpose seen
// column-major. Each operand's last two dims must read as row-major or
// column-major with a usable leading dimension, which the op flags absorb;
// anything else (broadcast rows, odd steps, negative strides) is copied into
// contiguous scratch first. Batch dims are coalesced; the innermost becomes
// the strided batch (stride 0 for a broadcast operand), outer ones a host loop.
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "elementwise.cuh"

namespace bp::cuda {

namespace {

#define BP_CUBLAS_CHECK(expr)                                                \
  do {                                                                       \
    const cublasStatus_t bp_blas_st_ = (expr);                               \
    if (bp_blas_st_ != CUBLAS_STATUS_SUCCESS) {                              \
      std::ostringstream bp_blas_os_;                                        \
      bp_blas_os_ << "[" << ::bp::cuda::current_op() << "] " << #expr        \
                  << " failed: " << cublasGetStatusName(bp_blas_st_) << ": " \
                  << cublasGetStatusString(bp_blas_st_);                     \
      throw std::runtime_error(bp_blas_os_.str());                           \
    }                                                                        \
  } while (0)

// Handles of destroyed streams, per device, for the next stream to take.
struct SpareHandles {
  std::mutex mu;
  std::vector<cublasHandle_t> free[kMaxDevices];
};

SpareHandles& spare_handles() {
  static SpareHandles* h = new SpareHandles();  // never destroyed, like the handles
  return *h;
}

// One handle per stream, bound to it once: a handle is never switched between
// streams while work of the old one may still use its workspace, and calls
// on one stream from several threads may share it (cuBLAS allows that while
// its stream and settings stay). Never destroyed: cublasDestroy at process
// exit can run after the driver has unloaded; a destroyed stream's handle
// goes to the next new stream (its work is done by then).
cublasHandle_t blas_handle(Stream& s) {
  void* h = s.blas.load(std::memory_order_acquire);
  if (h != nullptr) return static_cast<cublasHandle_t>(h);
  SpareHandles& spares = spare_handles();
  std::lock_guard lock(spares.mu);
  h = s.blas.load(std::memory_order_relaxed);
  if (h != nullptr) return static_cast<cublasHandle_t>(h);
  cublasHandle_t made = nullptr;
  std::vector<cublasHandle_t>& free = spares.free[s.device];
  if (!free.empty()) {
    made = free.back();
    free.pop_back();
  } else {
    BP_CUBLAS_CHECK(cublasCreate(&made));  // on the current device: the stream's
  }
  const cublasStatus_t st = cublasSetStream(made, s.handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    free.push_back(made);
    BP_CUBLAS_CHECK(st);
  }
  s.blas.store(made, std::memory_order_release);
  return made;
}

// The last two dims of an operand as cuBLAS sees them.
struct Matrix {
  bool row_major = true;
  int64_t ld = 1;
};

std::optional<Matrix> as_matrix(int64_t rows, int64_t cols, int64_t s_r, int64_t s_c) {
  if ((cols == 1 || s_c == 1) && (rows == 1 || s_r >= std::max<int64_t>(1, cols)))
    return Matrix{true, rows == 1 ? std::max<int64_t>(1, cols) : s_r};
  if ((rows == 1 || s_r == 1) && (cols == 1 || s_c >= std::max<int64_t>(1, rows)))
    return Matrix{false, cols == 1 ? std::max<int64_t>(1, rows) : s_c};
  return std::nullopt;
}

// A contiguous copy of a tensor in scratch memory, described as a bp_tensor.
struct Contiguous {
  std::optional<Scratch> memory;
  int64_t shape[BP_MAX_DIMS] = {}, strides[BP_MAX_DIMS] = {};
  bp_tensor t{};

  Contiguous(const Stream& st, const TensorRef& like) {
    t = like.raw();
    int64_t s = 1;
    for (int d = like.ndim() - 1; d >= 0; --d) {
      shape[d] = like.size(d);
      strides[d] = s;
      s *= like.size(d);
    }
    memory.emplace(st, static_cast<std::size_t>(s) * bp::sdk::dtype_size(like.dtype()));
    t.data = memory->get();
    t.byte_offset = 0;
    t.shape = shape;
    t.strides = strides;
  }
};

template <class T>
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const T* a, int64_t lda, int64_t sa, const T* b, int64_t ldb, int64_t sb, T* c,
          int64_t ldc, int64_t sc, int64_t batch) {
  const T one = 1, zero = 0;
  if constexpr (std::is_same_v<T, float>)
    BP_CUBLAS_CHECK(cublasSgemmStridedBatched_64(h, ta, tb, m, n, k, &one, a, lda, sa, b, ldb, sb,
                                                 &zero, c, ldc, sc, batch));
  else
    BP_CUBLAS_CHECK(cublasDgemmStridedBatched_64(h, ta, tb, m, n, k, &one, a, lda, sa, b, ldb, sb,
                                                 &zero, c, ldc, sc, batch));
}

template <class T>
void matmul_typed(Stream& st, const TensorRef& out, const TensorRef& a_in, const TensorRef& b_in) {
  const cudaStream_t s = st.handle;
  const int nd = out.ndim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a_in.size(nd - 1);
  const auto mat = [&](const TensorRef& t) {
    return as_matrix(t.size(nd - 2), t.size(nd - 1), t.stride(nd - 2), t.stride(nd - 1));
  };
  // Operands that cuBLAS cannot read as they are go through contiguous scratch.
  std::optional<Contiguous> a_copy, b_copy, out_copy;
  std::optional<Matrix> ma = mat(a_in), mb = mat(b_in), mc = mat(out);
  if (!ma) {
    a_copy.emplace(st, a_in);
    copy_tensor(s, a_copy->t, a_in.raw());
  }
  if (!mb) {
    b_copy.emplace(st, b_in);
    copy_tensor(s, b_copy->t, b_in.raw());
  }
  if (!mc) out_copy.emplace(st, out);
  const TensorRef a = a_copy ? TensorRef(a_copy->t) : a_in;
  const TensorRef b = b_copy ? TensorRef(b_copy->t) : b_in;
  const TensorRef c = out_copy ? TensorRef(out_copy->t) : out;
  ma = mat(a);
  mb = mat(b);
  mc = mat(c);

  const auto L = bp::sdk::make_layout<3>(nd - 2, c.shape(), {c.strides(), a.strides(), b.strides()},
                                         {1, 1, 1});
  const int inner = L.ndim - 1;
  const int64_t batch = L.shape[inner];
  int64_t outer = 1;
  for (int d = 0; d < inner; ++d) outer *= L.shape[d];
  const cublasHandle_t h = blas_handle(st);
  const auto op = [](bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; };
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off[3] = {0, 0, 0};
    for (int64_t d = inner - 1, rest = o; d >= 0; --d) {
      const int64_t i = rest % L.shape[d];
      rest /= L.shape[d];
      for (int q = 0; q < 3; ++q) off[q] += i * L.strides[q][d];
    }
    T* pc = c.data<T>() + off[0];
    const T* pa = a.data<T>() + off[1];
    const T* pb = b.data<T>() + off[2];
    const int64_t sc = L.strides[0][inner], sa = L.strides[1][inner], sb = L.strides[2][inner];
    if (mc->row_major) {
      // Column-major C^T (n x m) = B^T (n x k) @ A^T (k x m).
      gemm<T>(h, op(!mb->row_major), op(!ma->row_major), n, m, k, pb, mb->ld, sb, pa, ma->ld, sa,
              pc, mc->ld, sc, batch);
    } else {
      gemm<T>(h, op(ma->row_major), op(mb->row_major), m, n, k, pa, ma->ld, sa, pb, mb->ld, sb, pc,
              mc->ld, sc, batch);
    }
  }
  if (out_copy) copy_tensor(s, out.raw(), out_copy->t);
}

void matmul_kernel(const KernelCall& c) {
  check::matmul(c);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  const int64_t k = a.size(nd - 1);
  if (out.numel() == 0) return;
  if (out.dtype() != BP_DTYPE_FLOAT32 && out.dtype() != BP_DTYPE_FLOAT64)
    BP_SDK_UNSUPPORTED("not implemented for " << bp::sdk::dtype_name(out.dtype()));
  Stream& s = prepare(c);
  if (k == 0) return fill_zero(s.handle, out.raw());
  if (out.dtype() == BP_DTYPE_FLOAT32)
    matmul_typed<float>(s, out, a, b);
  else
    matmul_typed<double>(s, out, a, b);
}

}  // namespace

void recycle_blas_handle(int device, void* handle) {
  SpareHandles& spares = spare_handles();
  std::lock_guard lock(spares.mu);
  spares.free[device].push_back(static_cast<cublasHandle_t>(handle));
}

void register_matmul_kernels(Registrar& r) {
  add_kernel<&matmul_kernel>(r, BP_OP_MATMUL, kFloatDtypes, BP_ORIGIN);
}

}  // namespace bp::cuda
