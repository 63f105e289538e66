// matmul through CLBlast (tuned per device) rather than a GEMM of our own:
// one Xgemm per batch matrix, in the call's queue, with the operands'
// strides as leading dimensions and transposes. An operand whose matrices
// have no unit stride, and every float16 / bfloat16 operand (computed in
// float32, rounded once when stored), goes through a contiguous temporary
// made by the copy kernel; so does an output CLBlast cannot write in place.
// First: it sets the OpenCL version the headers declare.
#include <clblast_c.h>

#include "opencl_backend.h"
#include "registration.h"

namespace bp::opencl {

namespace {

// A temporary contiguous buffer with a descriptor over it.
struct Temp {
  cl_mem mem = nullptr;
  std::vector<int64_t> shape, strides;
  bp_tensor desc{};
  Temp() = default;
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() {
    // OpenCL keeps the buffer until the commands using it are done.
    if (mem != nullptr) clReleaseMemObject(mem);
  }
  void make(int32_t index, const TensorRef& like, bp_dtype dtype) {
    shape.assign(like.shape(), like.shape() + like.ndim());
    strides.assign(shape.size(), 1);
    for (int d = like.ndim() - 2; d >= 0; --d)
      strides[static_cast<std::size_t>(d)] =
          strides[static_cast<std::size_t>(d) + 1] *
          std::max<int64_t>(shape[static_cast<std::size_t>(d) + 1], 1);
    const std::size_t bytes = static_cast<std::size_t>(like.numel()) * bp::sdk::dtype_size(dtype);
    cl_int err = CL_SUCCESS;
    mem = clCreateBuffer(device(index).context, CL_MEM_READ_WRITE, bytes == 0 ? 1 : bytes, nullptr,
                         &err);
    BP_CL_CHECK(err);
    desc = like.raw();
    desc.data = mem;
    desc.byte_offset = 0;
    desc.dtype = bp::sdk::to_dl(dtype);
    desc.shape = shape.data();
    desc.strides = strides.data();
  }
};

// How CLBlast reads the matrices of an operand: transposed or not, and the
// leading dimension; nothing when neither of its last two dims has stride 1.
struct Blas {
  bool ok = false;
  CLBlastTranspose trans = CLBlastTransposeNo;
  std::size_t ld = 0;
};

Blas blas_view(const bp_tensor& t) {
  const int nd = t.ndim;
  const int64_t rows = t.shape[nd - 2], cols = t.shape[nd - 1];
  const int64_t rs = t.strides[nd - 2], cs = t.strides[nd - 1];
  Blas b;
  if (cs == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1))
      return {true, CLBlastTransposeNo, static_cast<std::size_t>(ld)};
  }
  if (rs == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1))
      return {true, CLBlastTransposeYes, static_cast<std::size_t>(ld)};
  }
  return b;
}

void gemm(Stream& s, bp_dtype t, const Blas& ba, const Blas& bb, std::size_t m, std::size_t n,
          std::size_t k, cl_mem a, std::size_t ao, cl_mem b, std::size_t bo, cl_mem c,
          std::size_t co, std::size_t ldc) {
  CLBlastStatusCode st;
  if (t == BP_DTYPE_FLOAT64)
    st = CLBlastDgemm(CLBlastLayoutRowMajor, ba.trans, bb.trans, m, n, k, 1.0, a, ao, ba.ld, b, bo,
                      bb.ld, 0.0, c, co, ldc, &s.queue, nullptr);
  else
    st = CLBlastSgemm(CLBlastLayoutRowMajor, ba.trans, bb.trans, m, n, k, 1.0f, a, ao, ba.ld, b, bo,
                      bb.ld, 0.0f, c, co, ldc, &s.queue, nullptr);
  ++s.submitted;
  if (st != CLBlastSuccess)
    BP_SDK_FAIL(std::runtime_error, "CLBlast " << (t == BP_DTYPE_FLOAT64 ? "Dgemm" : "Sgemm")
                                               << " (" << m << "x" << k << " by " << k << "x" << n
                                               << ") failed with status " << static_cast<int>(st));
}

void zero_fill(Stream& s, const bp_tensor& out) {
  const TensorRef o(out);
  cl_kernel kf = kernel(
      s.device, ProgramSpec{"pointwise", {{"T", o.dtype()}, {"B", BP_DTYPE_BOOL}}, {}}, "fill");
  const Geo g = coalesced({o});
  const cl_long zero = 0;
  Args(kf).mem(out.data).mem(out.data).mem(out.data).mem(out.data)
      << g << zero << zero << zero << s.errors;
  launch(s, kf, static_cast<std::size_t>(g.n));
}

void matmul(const KernelCall& c) {
  OpScope scope("matmul");
  const bp_dtype t = c.dtype();
  check_dtype(c.device(), t);
  const TensorRef a = c.input(0), b = c.input(1), out = c.output(0);
  const int nd = out.ndim();
  BP_SDK_REQUIRE(
      nd >= 2 && a.ndim() == nd && b.ndim() == nd,
      "expected operands of one rank >= 2, got " << a.ndim() << ", " << b.ndim() << " -> " << nd);
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  BP_SDK_REQUIRE(a.size(nd - 2) == m && b.size(nd - 2) == k && b.size(nd - 1) == n,
                 "shapes do not agree for matmul");
  if (out.numel() == 0) return;
  Stream& s = resolve(c.device(), c.stream());
  if (k == 0) {
    zero_fill(s, out.raw());
    return;
  }
  const bool narrow = t == BP_DTYPE_FLOAT16 || t == BP_DTYPE_BFLOAT16;
  const bp_dtype ct = narrow ? BP_DTYPE_FLOAT32 : t;
  Temp ta, tb, tc;
  const bp_tensor* pa = &a.raw();
  const bp_tensor* pb = &b.raw();
  const bp_tensor* pc = &out.raw();
  if (narrow || !blas_view(*pa).ok) {
    ta.make(c.device(), a, ct);
    enqueue_copy(s, ta.desc, a.raw());
    pa = &ta.desc;
  }
  if (narrow || !blas_view(*pb).ok) {
    tb.make(c.device(), b, ct);
    enqueue_copy(s, tb.desc, b.raw());
    pb = &tb.desc;
  }
  const Blas bc = blas_view(*pc);
  if (narrow || !bc.ok || bc.trans != CLBlastTransposeNo) {
    tc.make(c.device(), out, ct);
    pc = &tc.desc;
  }
  const Blas ba = blas_view(*pa), bb = blas_view(*pb), bo = blas_view(*pc);
  const std::size_t esz = bp::sdk::dtype_size(ct);
  // Every batch matrix, row-major over the batch dims (broadcast: stride 0).
  int64_t batches = 1;
  for (int d = 0; d < nd - 2; ++d) batches *= out.size(d);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rest = i, oa = 0, ob = 0, oc = 0;
    for (int d = nd - 3; d >= 0; --d) {
      const int64_t coord = rest % out.size(d);
      rest /= out.size(d);
      oa += coord * pa->strides[d];
      ob += coord * pb->strides[d];
      oc += coord * pc->strides[d];
    }
    gemm(s, ct, ba, bb, static_cast<std::size_t>(m), static_cast<std::size_t>(n),
         static_cast<std::size_t>(k), as_mem(pa->data),
         static_cast<std::size_t>(oa) + pa->byte_offset / esz, as_mem(pb->data),
         static_cast<std::size_t>(ob) + pb->byte_offset / esz, as_mem(pc->data),
         static_cast<std::size_t>(oc) + pc->byte_offset / esz, bo.ld);
  }
  if (pc != &out.raw()) enqueue_copy(s, out.raw(), *pc);
}

}  // namespace

void register_matmul_kernels(Registrar& r) { add_kernel<matmul>(r, BP_OP_MATMUL, kFloating); }

}  // namespace bp::opencl
