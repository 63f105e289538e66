// Sparse COO tensors (SP-1) on the device under test, against PyTorch 1.13
// (sparse_fixtures.inc, written by conformance/fixtures/sparse_reference.py,
// which says how the example is made): construction and its checks,
// coalesce, to_dense / to_sparse, zero_, sums, sparse + sparse, dense +
// sparse, sparse - sparse, mm / matmul / addmm and their gradients, int32
// indices, and the printed form (requires_grad and grad_fn too). The
// numeric cases run in float32 and float64; the fixture is float64.
#include <backplane/conformance.h>
#include <backplane/sparse/coo.h>

#include <cmath>
#include <string>
#include <vector>

#include "case_checks.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "sparse";
constexpr int64_t kNnz = 40;  // ten coordinates stored twice (j and j + 30)

struct Fixture {
  const char* name;
  std::vector<std::vector<double>> tensors;
  const char* text;
};

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> f = {
#include "sparse_fixtures.inc"
  };
  return f;
}

const Fixture& fixture(const std::string& name) {
  for (const Fixture& f : fixtures())
    if (name == f.name) return f;
  throw InternalError("no sparse fixture named " + name);
}

const std::vector<double>& part(const std::string& name, std::size_t i) {
  return fixture(name).tensors.at(i);
}

// 1.5 sin(0.37 i + phase), row-major in `shape`: as the script makes them.
Tensor vals(const Context& ctx, DType dt, std::vector<int64_t> shape, double phase) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = 1.5 * std::sin(0.37 * static_cast<double>(i) + phase);
  return from_vector(v, IntArrayRef(shape), ctx.options(DType::Float64)).to(dt);
}

// The script's 5 x 6 example: element j at ((7j + 3) mod 5, (11j + 1) mod 6).
SparseTensor example(const Context& ctx, DType dt) {
  std::vector<int64_t> idx(2 * kNnz);
  for (int64_t j = 0; j < kNnz; ++j) {
    idx[static_cast<std::size_t>(j)] = (7 * j + 3) % 5;
    idx[static_cast<std::size_t>(kNnz + j)] = (11 * j + 1) % 6;
  }
  return sparse_coo_tensor(from_vector(idx, {2, kNnz}, ctx.options(DType::Int64)),
                           vals(ctx, dt, {kNnz}, 0.0), {5, 6});
}

double tol(DType dt) { return dt == DType::Float64 ? 1e-12 : 2e-5; }

void expect_near(const Tensor& t, const std::vector<double>& want, DType dt, const char* what) {
  expect_close(t, want, tol(dt), tol(dt), what, __FILE__, __LINE__);
}

void expect_indices(const Tensor& t, const std::vector<double>& want) {
  BP_EXPECT_EQ(t.dtype(), DType::Int64);
  BP_EXPECT_VALUES(t, want);
}

// --- numeric cases, per dtype ---------------------------------------------

void coalesce_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  BP_EXPECT(!s.is_coalesced(), "a constructed tensor is uncoalesced");
  const SparseTensor c = s.coalesce();
  BP_EXPECT(c.is_coalesced());
  BP_EXPECT_EQ(c.device(), ctx.device());
  expect_indices(c.indices(), part("coalesce", 0));
  expect_near(c.values(), part("coalesce", 1), dt, "coalesce().values()");
  BP_EXPECT_EQ(s.nnz(), kNnz, "coalesce must leave its input unchanged");
  expect_near(s.to_dense(), part("to_dense", 0), dt, "to_dense()");
}

void mm_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  const Tensor d = vals(ctx, dt, {6, 4}, 0.5);
  expect_near(mm(s, d), part("mm", 0), dt, "mm(S, D)");
  expect_near(addmm(vals(ctx, dt, {5, 4}, 1.0), s, d, 0.5, -2.0), part("addmm", 0), dt,
              "addmm(C, S, D, beta=0.5, alpha=-2)");
}

void mm_grad_case(const Context& ctx, DType dt) {
  SparseTensor s = example(ctx, dt);
  s.requires_grad_();
  Tensor d = vals(ctx, dt, {6, 4}, 0.5).requires_grad_();
  (mm(s, d) * vals(ctx, dt, {5, 4}, 2.0)).sum().backward();
  expect_near(d.grad(), part("mm.grad", 0), dt, "D.grad");
  const SparseTensor g = s.grad();
  BP_EXPECT(g.defined(), "the sparse operand has no gradient");
  expect_indices(g.coalesce().indices(), part("mm.grad", 1));
  expect_near(g.coalesce().values(), part("mm.grad", 2), dt, "S.grad values");
}

void to_dense_grad_case(const Context& ctx, DType dt) {
  SparseTensor s = example(ctx, dt);
  s.requires_grad_();
  (s.to_dense() * vals(ctx, dt, {5, 6}, 0.8)).sum().backward();
  const SparseTensor g = s.grad().coalesce();
  expect_indices(g.indices(), part("to_dense.grad", 0));
  expect_near(g.values(), part("to_dense.grad", 1), dt, "S.grad values");
}

void add_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  const Tensor base = vals(ctx, dt, {5, 6}, 1.3);
  expect_near(base + s, part("dense_add", 0), dt, "dense + sparse");
  Tensor inplace = base.clone();
  const uint32_t before = inplace.version();
  add_(inplace, s, -0.5);
  BP_EXPECT(inplace.version() > before, "dense.add_(sparse) must bump the version");
  expect_near(inplace, part("dense_add_", 0), dt, "dense.add_(sparse, alpha=-0.5)");
  const SparseTensor c = s.coalesce();
  const SparseTensor twice = c + c * 2;
  BP_EXPECT(twice.is_coalesced(), "the sum of coalesced tensors is coalesced");
  expect_indices(twice.indices(), part("sparse_add", 0));
  expect_near(twice.values(), part("sparse_add", 1), dt, "(c + 2c).values()");
}

void sum_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  expect_near(sparse::sum(s), part("sum", 0), dt, "sparse.sum(S)");
  const sparse::SumResult r0 = sparse::sum(s, {0});
  BP_EXPECT(r0.is_sparse(), "a sum over dim 0 keeps a sparse dim");
  expect_indices(r0.sparse().indices(), part("sum.dim0", 0));
  expect_near(r0.sparse().values(), part("sum.dim0", 1), dt, "sparse.sum(S, 0)");
  expect_near(sparse::sum(s, {0, 1}).dense(), part("sum.dim01", 0), dt, "sparse.sum(S, (0, 1))");
  const SparseTensor t = s.t();
  BP_EXPECT(!t.is_coalesced());
  expect_indices(t.coalesce().indices(), part("t", 0));
  expect_near(t.coalesce().values(), part("t", 1), dt, "S.t()");
}

void to_sparse_case(const Context& ctx, DType dt) {
  const Tensor dense = from_vector(std::vector<double>{0, 1.5, 0, 0, 0, 0, -2, 0, 3}, {3, 3},
                                   ctx.options(DType::Float64))
                           .to(dt);
  const SparseTensor s = to_sparse(dense);
  BP_EXPECT(s.is_coalesced());
  expect_indices(s.indices(), part("to_sparse", 0));
  expect_near(s.values(), part("to_sparse", 1), dt, "to_sparse().values()");
  expect_near(s.to_dense(), dense.to(DType::Float64).to_vector<double>(), dt, "round trip");
}

// S - O and S.sub(O, alpha=2), O every element of a dense tensor stored;
// -S; the coalesced flag of a difference.
void sub_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  const SparseTensor other = to_sparse(vals(ctx, dt, {5, 6}, 1.3));
  const SparseTensor diff = (s - other).coalesce();
  expect_indices(diff.indices(), part("sub", 0));
  expect_near(diff.values(), part("sub", 1), dt, "(S - O).values()");
  const SparseTensor diff2 = s.sub(other, 2).coalesce();
  expect_indices(diff2.indices(), part("sub.alpha", 0));
  expect_near(diff2.values(), part("sub.alpha", 1), dt, "S.sub(O, alpha=2).values()");
  const std::vector<double>& flags = part("sub.coalesced_flag", 0);
  BP_EXPECT_EQ((s - other).is_coalesced(), flags.at(0) != 0, "S - O with S uncoalesced");
  BP_EXPECT_EQ((s.coalesce() - other).is_coalesced(), flags.at(1) != 0,
               "S - O with both coalesced");
  expect_near((-s).coalesce().values(), part("neg", 0), dt, "(-S).values()");
}

// torch.matmul(S, D), Python's S @ D: a 2-D and a 1-D dense operand.
void matmul_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  const Tensor m = matmul(s, vals(ctx, dt, {6, 4}, 0.5));
  BP_EXPECT_EQ(DimVector(m.sizes()), (DimVector{5, 4}));
  expect_near(m, part("matmul", 0), dt, "matmul(S, D)");
  const Tensor v = matmul(s, vals(ctx, dt, {6}, 0.5));
  BP_EXPECT_EQ(DimVector(v.sizes()), (DimVector{5}));
  expect_near(v, part("matmul", 1), dt, "matmul(S, d)");
}

// Indices given as int32 are converted to int64, as PyTorch's constructor does.
void int32_indices_case(const Context& ctx, DType dt) {
  const SparseTensor s = example(ctx, dt);
  const SparseTensor s32 =
      sparse_coo_tensor(s._indices().to(DType::Int32), vals(ctx, dt, {kNnz}, 0.0), {5, 6});
  BP_EXPECT_EQ(s32._indices().dtype() == DType::Int64, part("int32_indices", 0).at(0) != 0);
  expect_near(s32.to_dense(), part("int32_indices", 1), dt, "to_dense() of int32-indexed S");
}

// --- the rest ----------------------------------------------------------------

// Construction on the device: metadata, and bad indices refused with inputs unchanged.
void construction(const Context& ctx) {
  const Tensor values = from_vector(std::vector<float>{1, 2}, {2}, ctx.options(DType::Float32));
  const SparseTensor s = sparse_coo_tensor(
      from_vector(std::vector<int64_t>{0, 1}, {1, 2}, ctx.options(DType::Int64)), values, {3});
  BP_EXPECT_EQ(s.sparse_dim(), 1);
  BP_EXPECT_EQ(s.dense_dim(), 0);
  BP_EXPECT_EQ(s.nnz(), 2);
  BP_EXPECT_EQ(s.device(), ctx.device());
  BP_EXPECT(s._values().shares_storage(values), "the values' memory is shared, not copied");
  SparseTensor flagged = s;
  flagged.requires_grad_();
  BP_EXPECT(!values.requires_grad(),
            "flagging the sparse tensor must not flag the caller's values");
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(ValueError, s.values()), "uncoalesced", ".coalesce()");
  const Tensor bad = from_vector(std::vector<int64_t>{0, 5}, {1, 2}, ctx.options(DType::Int64));
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, sparse_coo_tensor(bad, values, {3})),
                     "size is inconsistent with indices: for dim 0, size is 3 but found index 5");
  const Tensor neg = from_vector(std::vector<int64_t>{0, -1}, {1, 2}, ctx.options(DType::Int64));
  BP_EXPECT_MENTIONS(BP_ERROR_MESSAGE(IndexError, sparse_coo_tensor(neg, values, {3})),
                     "found negative index -1 for dim 0");
  BP_EXPECT_VALUES(values, {1, 2});
  // Hybrid: a dense trailing dim.
  const SparseTensor h = sparse_coo_tensor(
      from_vector(std::vector<int64_t>{0, 2}, {1, 2}, ctx.options(DType::Int64)),
      from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, ctx.options(DType::Float32)), {3, 2});
  BP_EXPECT_EQ(h.dense_dim(), 1);
  BP_EXPECT_VALUES(h.to_dense(), {1, 2, 0, 0, 3, 4});
}

// zero_() clears every value and keeps the size, through every handle.
void zero_case(const Context& ctx) {
  SparseTensor s = sparse_coo_tensor(
      from_vector(std::vector<int64_t>{0, 1}, {1, 2}, ctx.options(DType::Int64)),
      from_vector(std::vector<float>{1, 2}, {2}, ctx.options(DType::Float32)), {2});
  const SparseTensor alias = s;
  s.zero_();
  BP_EXPECT_EQ(alias.nnz(), 0, "zero_() must empty every handle of the tensor");
  BP_EXPECT_EQ(alias.size(0), 2);
  BP_EXPECT(alias.is_coalesced());
  BP_EXPECT_EQ(alias.device(), ctx.device());
  BP_EXPECT_VALUES(alias.to_dense(), {0, 0});
}

// zero_() on a hybrid tensor makes every dim sparse, as PyTorch: indices
// [2, 0], values [0], sizes kept.
void zero_hybrid_case(const Context& ctx) {
  SparseTensor h = sparse_coo_tensor(
      from_vector(std::vector<int64_t>{0, 1}, {1, 2}, ctx.options(DType::Int64)),
      from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, ctx.options(DType::Float32)), {3, 2});
  const SparseTensor alias = h;
  h.zero_();
  const std::vector<double>& dims = part("zero_.hybrid", 0);
  BP_EXPECT_EQ(alias.sparse_dim(), static_cast<int64_t>(dims.at(0)));
  BP_EXPECT_EQ(alias.dense_dim(), static_cast<int64_t>(dims.at(1)));
  BP_EXPECT_EQ(alias.nnz(), static_cast<int64_t>(dims.at(2)));
  auto shape_of = [](const std::vector<double>& v) {
    DimVector d;
    for (double x : v) d.push_back(static_cast<int64_t>(x));
    return d;
  };
  BP_EXPECT_EQ(DimVector(alias._indices().sizes()), shape_of(part("zero_.hybrid", 1)),
               "the indices' shape");
  BP_EXPECT_EQ(DimVector(alias._values().sizes()), shape_of(part("zero_.hybrid", 2)),
               "the values' shape");
  BP_EXPECT_EQ(DimVector(alias.sizes()), (DimVector{3, 2}));
  BP_EXPECT(alias.is_coalesced());
  BP_EXPECT_VALUES(alias.to_dense(), {0, 0, 0, 0, 0, 0});
}

// A fresh tensor of 0 or 1 stored elements is coalesced, as in PyTorch 1.13;
// one of 2 is not.
void fresh_coalesced_case(const Context& ctx) {
  const auto i64 = ctx.options(DType::Int64);
  const auto f32 = ctx.options(DType::Float32);
  const SparseTensor fresh[] = {
      sparse_coo_tensor(zeros({2, 0}, i64), zeros({0}, f32), {2, 3}),
      sparse_coo_tensor(from_vector(std::vector<int64_t>{1, 2}, {2, 1}, i64),
                        from_vector(std::vector<float>{5}, {1}, f32), {2, 3}),
      sparse_coo_tensor(from_vector(std::vector<int64_t>{1}, {1, 1}, i64),
                        from_vector(std::vector<float>{5, 1}, {1, 2}, f32), {2, 2}),
      sparse_coo_tensor(from_vector(std::vector<int64_t>{1, 2}, {2, 1}, i64),
                        from_vector(std::vector<float>{5}, {1}, f32)),
      sparse_coo_tensor(from_vector(std::vector<int64_t>{0, 1, 2, 1}, {2, 2}, i64),
                        from_vector(std::vector<float>{5, 1}, {2}, f32), {2, 3}),
  };
  const std::vector<double>& want = part("is_coalesced.fresh", 0);
  for (std::size_t k = 0; k < std::size(fresh); ++k)
    BP_EXPECT_EQ(fresh[k].is_coalesced(), want.at(k) != 0, "fresh tensor ", k, " (nnz ",
                 fresh[k].nnz(), ")");
  BP_EXPECT_VALUES(fresh[1].indices(), {1, 2});  // coalesced: indices() answers
}

// Scalars, clone, detach, and a move to the reference device and back.
void copies_case(const Context& ctx) {
  SparseTensor s = example(ctx, DType::Float32);
  BP_EXPECT_VALUES((s * 2)._values() - s._values() * 2, std::vector<double>(kNnz, 0.0));
  BP_EXPECT(!(s * 2).is_coalesced() && (s.coalesce() / 2).is_coalesced(),
            "a scalar op keeps the coalesced flag");
  const SparseTensor c = s.clone();
  BP_EXPECT(!c._values().shares_storage(s._values()), "clone() copies the values");
  s.requires_grad_();
  BP_EXPECT(!s.detach().requires_grad());
  BP_EXPECT(s.detach()._values().shares_storage(s._values()), "detach() shares the values");
  const SparseTensor there = s.detach().to(ctx.reference_device());
  BP_EXPECT_EQ(there.device(), ctx.reference_device());
  expect_close(there.to(ctx.device()).to_dense(), part("to_dense", 0), 2e-5, 2e-5, "round trip",
               __FILE__, __LINE__);
}

// PyTorch's printed form; on a device that is not the default one the
// device is named first, as PyTorch names a CUDA device.
void print_case(const Context& ctx) {
  const Tensor i =
      from_vector(std::vector<int64_t>{1, 0, 1, 0, 2, 0}, {2, 3}, ctx.options(DType::Int64));
  const Tensor v = from_vector(std::vector<float>{1, 2, 3}, {3}, ctx.options(DType::Float32));
  SparseTensor zeroed = sparse_coo_tensor(i, v, {2, 3});
  zeroed.zero_();
  const struct {
    const char* name;
    SparseTensor t;
  } shown[] = {
      {"print.uncoalesced", sparse_coo_tensor(i, v, {2, 3})},
      {"print.zeroed", zeroed},
      {"print.hybrid",
       sparse_coo_tensor(
           from_vector(std::vector<int64_t>{0, 1}, {1, 2}, ctx.options(DType::Int64)),
           from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, ctx.options(DType::Float32)),
           {3, 2})},
      {"print.int64",
       sparse_coo_tensor(
           from_vector(std::vector<int64_t>{0, 1, 0}, {1, 3}, ctx.options(DType::Int64)),
           from_vector(std::vector<int64_t>{1, 2, 3}, {3}, ctx.options(DType::Int64)), {2})},
      {"print.coalesced", example(ctx, DType::Float32).coalesce()},
  };
  std::string device_part;
  if (ctx.device() != default_device()) device_part = "device='" + to_string(ctx.device()) + "', ";
  for (const auto& s : shown) {
    std::string want = fixture(s.name).text;
    const std::size_t at = want.rfind("size=(");
    want.insert(at, device_part);
    BP_EXPECT_EQ(s.t.to_string(), want, "for ", s.name);
  }
}

// requires_grad=True and a result's grad_fn, as PyTorch prints them: after
// the layout, on a line of their own when the size line has no room. On a
// device other than the default one (named on the size line, which then
// has no room either) the suffix must end the text.
void print_grad_case(const Context& ctx) {
  const Tensor i =
      from_vector(std::vector<int64_t>{1, 0, 1, 0, 2, 0}, {2, 3}, ctx.options(DType::Int64));
  const Tensor v = from_vector(std::vector<float>{1, 2, 3}, {3}, ctx.options(DType::Float32));
  SparseTensor leaf = sparse_coo_tensor(i, v, {2, 3});
  leaf.requires_grad_();
  SparseTensor wide = sparse_coo_tensor(i, v, {2000000, 3000000});
  wide.requires_grad_();
  const struct {
    const char* name;
    SparseTensor t;
    const char* suffix;
  } shown[] = {
      {"print.requires_grad", leaf, "requires_grad=True)"},
      {"print.grad_fn", leaf * 2, "grad_fn=<MulBackward0>)"},
      {"print.requires_grad_wrapped", wide, "\n       requires_grad=True)"},
  };
  for (const auto& s : shown) {
    const std::string got = s.t.to_string();
    if (ctx.device() == default_device()) {
      BP_EXPECT_EQ(got, std::string(fixture(s.name).text), "for ", s.name);
    } else {
      const std::string suffix = s.suffix;
      BP_EXPECT(got.size() > suffix.size() &&
                    got.compare(got.size() - suffix.size(), suffix.size(), suffix) == 0,
                "for ", s.name, ": ", got);
      BP_EXPECT_MENTIONS(got, "device='" + to_string(ctx.device()) + "'");
    }
  }
}

}  // namespace

void add_sparse_cases(Suite& suite) {
  const std::vector<std::string> ids = {"SP-1"};
  suite.add({"sparse.construction", ids, kCategory, construction});
  suite.add({"sparse.zero_", ids, kCategory, zero_case});
  suite.add({"sparse.copies", ids, kCategory, copies_case});
  suite.add({"sparse.print", ids, kCategory, print_case});
  suite.add({"sparse.print_grad", ids, kCategory, print_grad_case});
  suite.add({"sparse.zero_hybrid", ids, kCategory, zero_hybrid_case});
  suite.add({"sparse.fresh_coalesced", ids, kCategory, fresh_coalesced_case});
  const struct {
    const char* name;
    void (*fn)(const Context&, DType);
  } numeric[] = {
      {"coalesce", coalesce_case},           {"mm", mm_case},   {"mm.grad", mm_grad_case},
      {"to_dense.grad", to_dense_grad_case}, {"add", add_case}, {"sum", sum_case},
      {"to_sparse", to_sparse_case},         {"sub", sub_case}, {"matmul", matmul_case},
      {"int32_indices", int32_indices_case}};
  for (const auto& n : numeric)
    for (DType dt : {DType::Float32, DType::Float64}) {
      auto fn = n.fn;
      suite.add({std::string("sparse.") + n.name + "." + std::string(name(dt)), ids, kCategory,
                 [fn, dt](const Context& ctx) { fn(ctx, dt); }});
    }
}

}  // namespace bp::conformance
