// The cases of `backplane perf`: every primitive op family at a few
// representative sizes (tiny: 64 elements, where the framework's overhead
// shows; cache-sized: 256K elements, 1 MiB of float32; memory-sized: 16M
// elements, 64 MiB), contiguous and strided; matmul at the usual square,
// transformer and attention shapes; the CNN layers at ResNet shapes.
#include <backplane/named_ops.h>
#include <backplane/nn_ops.h>

#include <string>
#include <utility>

#include "perf.h"

namespace bp::cli::perf {

namespace {

constexpr int64_t kTiny = 64, kCache = int64_t{1} << 18, kMemory = int64_t{1} << 24;

std::string size_label(int64_t n) {
  if (n >= (int64_t{1} << 20) && n % (int64_t{1} << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

// A square side with side * side == n (n is a power of 4 here).
int64_t side_of(int64_t n) {
  int64_t s = 1;
  while (s * s < n) s *= 2;
  return s;
}

TensorOptions on(Device d, DType t) { return TensorOptions(t).device(d); }
// Inputs hold one value: the figures do not depend on the data, and a
// constant avoids denormals and NaN (0.75 is in every op's domain here).
Tensor input(IntArrayRef shape, Device d, DType t) {
  return full(shape, is_floating(t) ? 0.75 : 3, on(d, t));
}
double es(DType t) { return static_cast<double>(itemsize(t)); }

struct Builder {
  std::vector<Case> out;

  void add(std::string name, std::string op, Bound b, std::vector<Op> needs, bool floating_only,
           std::function<Workload(Device, DType)> prepare, std::string named = {}) {
    out.push_back(Case{std::move(name), std::move(op), b, std::move(needs), std::move(named),
                       floating_only, std::move(prepare)});
  }

  // An elementwise op of `arity` inputs over n elements, as f(inputs).
  // `flops`: per element (1 for arithmetic, 0 for data movement).
  template <class F>
  void elementwise(const std::string& op, Op kernel, int arity, int64_t n, bool floating_only, F f,
                   double result_bytes_per_elem = -1, double flops = 1) {
    add(op + "/contiguous/" + size_label(n), op, Bound::Memory, {kernel}, floating_only,
        [=](Device d, DType t) {
          std::vector<Tensor> in;
          for (int i = 0; i < arity; ++i) in.push_back(input({n}, d, t));
          const double out_bytes = result_bytes_per_elem < 0 ? es(t) : result_bytes_per_elem;
          return Workload{[in, f] { (void)f(in); }, n * (arity * es(t) + out_bytes), flops * n};
        });
  }
};

std::vector<Case> make_cases() {
  Builder b;
  using V = std::vector<Tensor>;
  // --- copies and fills ----------------------------------------------------
  for (int64_t n : {kTiny, kCache, kMemory}) {
    b.elementwise(
        "copy", Op::Copy, 1, n, false, [](const V& a) { return a[0].clone(); }, -1, 0);
    b.add("fill/contiguous/" + size_label(n), "fill", Bound::Memory, {Op::Fill}, false,
          [=](Device d, DType t) {
            Tensor x = input({n}, d, t);
            return Workload{[x]() mutable { x.fill_(2); }, n * es(t), 0};
          });
  }
  for (int64_t n : {kCache, kMemory})
    b.add("copy/transposed/" + size_label(n), "copy", Bound::Memory, {Op::Copy}, false,
          [=](Device d, DType t) {
            const int64_t s = side_of(n);
            Tensor x = input({s, s}, d, t);
            return Workload{[x] { (void)x.t().contiguous(); }, 2 * n * es(t), 0};
          });
  // --- binary ----------------------------------------------------------------
  for (int64_t n : {kTiny, kCache, kMemory})
    b.elementwise("add", Op::Add, 2, n, false, [](const V& a) { return add(a[0], a[1]); });
  b.elementwise("mul", Op::Mul, 2, kMemory, false, [](const V& a) { return mul(a[0], a[1]); });
  b.elementwise("div", Op::Div, 2, kMemory, true, [](const V& a) { return div(a[0], a[1]); });
  b.elementwise("maximum", Op::Maximum, 2, kMemory, false,
                [](const V& a) { return maximum(a[0], a[1]); });
  b.elementwise("sub", Op::Sub, 2, kMemory, false, [](const V& a) { return sub(a[0], a[1]); });
  b.elementwise("minimum", Op::Minimum, 2, kMemory, false,
                [](const V& a) { return minimum(a[0], a[1]); });
  b.elementwise("pow", Op::Pow, 2, kMemory, false, [](const V& a) { return pow(a[0], a[1]); });
  b.elementwise(
      "lt", Op::Lt, 2, kMemory, false, [](const V& a) { return lt(a[0], a[1]); }, 1.0);
  b.elementwise(
      "le", Op::Le, 2, kMemory, false, [](const V& a) { return le(a[0], a[1]); }, 1.0);
  b.elementwise(
      "gt", Op::Gt, 2, kMemory, false, [](const V& a) { return gt(a[0], a[1]); }, 1.0);
  b.elementwise(
      "ge", Op::Ge, 2, kMemory, false, [](const V& a) { return ge(a[0], a[1]); }, 1.0);
  b.elementwise(
      "eq", Op::Eq, 2, kMemory, false, [](const V& a) { return eq(a[0], a[1]); }, 1.0);
  b.elementwise(
      "ne", Op::Ne, 2, kMemory, false, [](const V& a) { return ne(a[0], a[1]); }, 1.0);
  b.elementwise(
      "logical_and", Op::LogicalAnd, 2, kMemory, false,
      [](const V& a) { return logical_and(a[0], a[1]); }, 1.0);
  b.elementwise(
      "logical_or", Op::LogicalOr, 2, kMemory, false,
      [](const V& a) { return logical_or(a[0], a[1]); }, 1.0);
  b.elementwise(
      "logical_not", Op::LogicalNot, 1, kMemory, false,
      [](const V& a) { return logical_not(a[0]); }, 1.0);
  for (int64_t n : {kCache, kMemory})
    b.add("add/transposed/" + size_label(n), "add", Bound::Memory, {Op::Add}, false,
          [=](Device d, DType t) {
            const int64_t s = side_of(n);
            Tensor x = input({s, s}, d, t), y = input({s, s}, d, t);
            return Workload{[x, y] { (void)add(x.t(), y); }, 3 * n * es(t), double(n)};
          });
  b.add("add/broadcast-row/16M", "add", Bound::Memory, {Op::Add}, false, [](Device d, DType t) {
    const int64_t s = side_of(kMemory);
    Tensor x = input({s, s}, d, t), row = input({s}, d, t);
    return Workload{[x, row] { (void)add(x, row); }, (2 * kMemory + s) * es(t), double(kMemory)};
  });
  b.add("where/contiguous/16M", "where", Bound::Memory, {Op::Where}, false, [](Device d, DType t) {
    Tensor c = full({kMemory}, true, on(d, DType::Bool)), x = input({kMemory}, d, t),
           y = input({kMemory}, d, t);
    return Workload{[c, x, y] { (void)where(c, x, y); }, kMemory * (1 + 3 * es(t)),
                    double(kMemory)};
  });
  // --- unary -----------------------------------------------------------------
  b.elementwise("neg", Op::Neg, 1, kMemory, false, [](const V& a) { return neg(a[0]); });
  b.elementwise("abs", Op::Abs, 1, kMemory, false, [](const V& a) { return abs(a[0]); });
  b.elementwise("relu", Op::Relu, 1, kMemory, false, [](const V& a) { return relu(a[0]); });
  b.elementwise("clamp", Op::Clamp, 1, kMemory, false,
                [](const V& a) { return clamp(a[0], 0, 1); });
  b.elementwise("exp", Op::Exp, 1, kMemory, true, [](const V& a) { return exp(a[0]); });
  b.elementwise("log", Op::Log, 1, kMemory, true, [](const V& a) { return log(a[0]); });
  b.elementwise("sqrt", Op::Sqrt, 1, kMemory, true, [](const V& a) { return sqrt(a[0]); });
  b.elementwise("sigmoid", Op::Sigmoid, 1, kMemory, true, [](const V& a) { return sigmoid(a[0]); });
  b.elementwise("tanh", Op::Tanh, 1, kMemory, true, [](const V& a) { return tanh(a[0]); });
  b.elementwise("erf", Op::Erf, 1, kMemory, true, [](const V& a) { return erf(a[0]); });
  b.add("rand/contiguous/16M", "rand", Bound::Memory, {Op::Random}, true, [](Device d, DType t) {
    return Workload{[=] { (void)rand({kMemory}, on(d, t)); }, kMemory * es(t), 0};
  });
  // --- reductions --------------------------------------------------------------
  for (int64_t n : {kCache, kMemory})
    b.add("sum/all/" + size_label(n), "sum", Bound::Memory, {Op::Sum}, false,
          [=](Device d, DType t) {
            Tensor x = input({n}, d, t);
            return Workload{[x] { (void)sum(x); }, n * es(t), double(n)};
          });
  const int64_t side = side_of(kMemory);
  for (const auto& [label, dim] : {std::pair{"rows", 1}, std::pair{"columns", 0}})
    b.add(std::string("sum/") + label + "/16M", "sum", Bound::Memory, {Op::Sum}, false,
          [=](Device d, DType t) {
            Tensor x = input({side, side}, d, t);
            return Workload{[x, dim] { (void)sum(x, {dim}); }, (kMemory + side) * es(t),
                            double(kMemory)};
          });
  b.add("max/all/16M", "max", Bound::Memory, {Op::Max}, false, [](Device d, DType t) {
    Tensor x = input({kMemory}, d, t);
    return Workload{[x] { (void)max(x); }, kMemory * es(t), double(kMemory)};
  });
  b.add("argmax/rows/16M", "argmax", Bound::Memory, {Op::Argmax}, false, [=](Device d, DType t) {
    Tensor x = input({side, side}, d, t);
    return Workload{[x] { (void)argmax(x, 1); }, kMemory * es(t) + side * 8.0, double(kMemory)};
  });
  b.add("argmin/rows/16M", "argmin", Bound::Memory, {Op::Argmin}, false, [=](Device d, DType t) {
    Tensor x = input({side, side}, d, t);
    return Workload{[x] { (void)argmin(x, 1); }, kMemory * es(t) + side * 8.0, double(kMemory)};
  });
  b.add("min/all/16M", "min", Bound::Memory, {Op::Min}, false, [](Device d, DType t) {
    Tensor x = input({kMemory}, d, t);
    return Workload{[x] { (void)min(x); }, kMemory * es(t), double(kMemory)};
  });
  b.add("prod/rows/16M", "prod", Bound::Memory, {Op::Prod}, false, [=](Device d, DType t) {
    Tensor x = input({side, side}, d, t);
    return Workload{[x] { (void)prod(x, 1); }, (kMemory + side) * es(t), double(kMemory)};
  });
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{256, 1024}, {side, side}}) {
    const std::string size = size_label(rows * cols);
    b.add("softmax/rows/" + size, "softmax", Bound::Memory, {Op::Softmax}, true,
          [=](Device d, DType t) {
            Tensor x = input({rows, cols}, d, t);
            return Workload{[x] { (void)softmax(x, 1); }, 2.0 * rows * cols * es(t),
                            4.0 * rows * cols};
          });
  }
  b.add("log_softmax/rows/16M", "log_softmax", Bound::Memory, {Op::LogSoftmax}, true,
        [=](Device d, DType t) {
          Tensor x = input({side, side}, d, t);
          return Workload{[x] { (void)log_softmax(x, 1); }, 2.0 * kMemory * es(t), 4.0 * kMemory};
        });
  // --- sorting and running sums ----------------------------------------------------
  b.add("argsort/rows/1M", "argsort", Bound::Memory, {Op::Argsort}, false, [](Device d, DType t) {
    Tensor x = input({1024, 1024}, d, t);
    const double n = 1024.0 * 1024;
    return Workload{[x] { (void)argsort(x, 1); }, n * (es(t) + 8), n * 10};  // ~log2(1024) compares
  });
  b.add("cumsum/rows/16M", "cumsum", Bound::Memory, {Op::Cumsum}, false, [=](Device d, DType t) {
    Tensor x = input({side, side}, d, t);
    const double out_size = is_floating(t) ? es(t) : 8.0;  // bool and integers sum to int64
    return Workload{[x] { (void)cumsum(x, 1); }, kMemory * (es(t) + out_size), double(kMemory)};
  });
  // --- indexing ------------------------------------------------------------------
  b.add("index_select/rows/16M", "index_select", Bound::Memory, {Op::IndexSelect}, false,
        [](Device d, DType t) {
          const int64_t rows = 65536, cols = 256, picked = 16384;
          std::vector<int64_t> idx(picked);
          for (int64_t i = 0; i < picked; ++i)
            idx[static_cast<std::size_t>(i)] = (i * 40503) % rows;  // scattered
          Tensor x = input({rows, cols}, d, t),
                 index = from_vector(idx, {picked}, on(d, DType::Int64));
          return Workload{[x, index] { (void)index_select(x, 0, index); },
                          2.0 * picked * cols * es(t) + picked * 8.0, 0};
        });
  // A quarter of each row of a 4096 x 4096 matrix, picked (gather) or written
  // (scatter, into a copy of it) at scattered columns.
  const auto columns = [side](Device d) {
    const int64_t picked = side / 4;
    std::vector<int64_t> idx(static_cast<std::size_t>(side * picked));
    for (int64_t r = 0; r < side; ++r)
      for (int64_t j = 0; j < picked; ++j)
        idx[static_cast<std::size_t>(r * picked + j)] = (j * 4 + r) % side;
    return from_vector(idx, {side, picked}, on(d, DType::Int64));
  };
  b.add("gather/columns/16M", "gather", Bound::Memory, {Op::Gather}, false, [=](Device d, DType t) {
    Tensor x = input({side, side}, d, t), index = columns(d);
    const double n = static_cast<double>(index.numel());
    return Workload{[x, index] { (void)gather(x, 1, index); }, n * (8 + 2 * es(t)), 0};
  });
  b.add("scatter/columns/16M", "scatter", Bound::Memory, {Op::Scatter, Op::Copy}, false,
        [=](Device d, DType t) {
          Tensor x = input({side, side}, d, t), index = columns(d),
                 src = input({side, side / 4}, d, t);
          const double n = static_cast<double>(index.numel());
          return Workload{[x, index, src] { (void)scatter(x, 1, index, src); },
                          2.0 * kMemory * es(t) + n * (8 + es(t)), 0};
        });
  // --- matmul ---------------------------------------------------------------------
  struct Mm {
    const char* name;
    int64_t batch, m, k, n;
  };
  for (const Mm& s :
       {Mm{"square/64", 0, 64, 64, 64}, Mm{"square/256", 0, 256, 256, 256},
        Mm{"square/1024", 0, 1024, 1024, 1024}, Mm{"transformer/2048x768x3072", 0, 2048, 768, 3072},
        Mm{"attention/16x512x64x512", 16, 512, 64, 512}})
    b.add(std::string("matmul/") + s.name, "matmul", Bound::Compute, {Op::Matmul}, true,
          [s](Device d, DType t) {
            const int64_t batch = s.batch ? s.batch : 1;
            Tensor x = s.batch ? input({s.batch, s.m, s.k}, d, t) : input({s.m, s.k}, d, t);
            Tensor y = s.batch ? input({s.batch, s.k, s.n}, d, t) : input({s.k, s.n}, d, t);
            const double bytes = batch * (s.m * s.k + s.k * s.n + s.m * s.n) * es(t);
            return Workload{[x, y] { (void)matmul(x, y); }, bytes, 2.0 * batch * s.m * s.k * s.n};
          });
  // --- CNN layers (the backend's named kernel when it has one, else the composite) --
  struct Conv {
    const char* name;
    int64_t n, c, h, o, k, pad;
  };
  for (const Conv& s : {Conv{"resnet-3x3/8x64x56x56", 8, 64, 56, 64, 3, 1},
                        Conv{"1x1/8x256x56x56-64", 8, 256, 56, 64, 1, 0}})
    b.add(
        std::string("conv2d/") + s.name, "conv2d", Bound::Compute, {Op::Matmul}, true,
        [s](Device d, DType t) {
          Tensor x = input({s.n, s.c, s.h, s.h}, d, t), w = input({s.o, s.c, s.k, s.k}, d, t);
          const double out =
              static_cast<double>(s.n) * s.o * s.h * s.h;  // stride 1, "same" padding
          const double bytes =
              (static_cast<double>(s.n) * s.c * s.h * s.h + s.o * s.c * s.k * s.k + out) * es(t);
          return Workload{[x, w, s] { (void)conv2d(x, w, Tensor(), 1, s.pad); }, bytes,
                          2.0 * out * s.c * s.k * s.k};
        },
        "core::conv2d");
  b.add(
      "max_pool2d/3x3s2/8x64x112x112", "max_pool2d", Bound::Memory, {Op::Max}, true,
      [](Device d, DType t) {
        Tensor x = input({8, 64, 112, 112}, d, t);
        const double out = 8.0 * 64 * 56 * 56;
        return Workload{[x] {
                          (void)max_pool2d(x, {3, 3}, Size2{2, 2}, {1, 1});
                        },
                        (4 * out + out) * es(t), 9 * out};
      },
      "core::max_pool2d");
  b.add(
      "avg_pool2d/2x2/8x64x112x112", "avg_pool2d", Bound::Memory, {Op::Sum}, true,
      [](Device d, DType t) {
        Tensor x = input({8, 64, 112, 112}, d, t);
        const double in = 8.0 * 64 * 112 * 112;
        return Workload{[x] { (void)avg_pool2d(x, {2, 2}); }, in * 1.25 * es(t), in};
      },
      "core::avg_pool2d");
  b.add(
      "batch_norm/training/8x64x56x56", "batch_norm", Bound::Memory, {Op::Sum}, true,
      [](Device d, DType t) {
        Tensor x = input({8, 64, 56, 56}, d, t), w = input({64}, d, t), bias = input({64}, d, t);
        Tensor rm = input({64}, d, t), rv = input({64}, d, t);
        const double n = 8.0 * 64 * 56 * 56;
        return Workload{[=] { (void)batch_norm(x, rm, rv, w, bias, true); }, 2 * n * es(t), 6 * n};
      },
      "core::batch_norm");
  return std::move(b.out);
}

}  // namespace

const std::vector<Case>& cases() {
  static const std::vector<Case> c = make_cases();
  return c;
}

std::vector<Op> ops_without_a_case() {
  std::vector<bool> seen(kNumOps, false);
  for (const Case& c : cases())
    for (Op op : c.needs) seen[static_cast<std::size_t>(op)] = true;
  seen[static_cast<std::size_t>(Op::Fill)] = true;  // every case's inputs, and fill/*
  std::vector<Op> missing;
  for (int op = 0; op < kNumOps; ++op)
    if (!seen[static_cast<std::size_t>(op)]) missing.push_back(static_cast<Op>(op));
  return missing;
}

std::string cannot_run(const Case& c, const Backend& backend, DType dtype) {
  if (c.floating_only && !is_floating(dtype)) return "takes floating dtypes only";
  std::vector<std::pair<Op, DType>> needs;
  // The composite's kernels, unless the backend runs the named op itself.
  if (path_of(c, backend, dtype) != "kernel")
    for (Op op : c.needs) needs.emplace_back(op, dtype);
  needs.emplace_back(Op::Fill, dtype);                             // the inputs are made with fill
  if (c.op == "where") needs.emplace_back(Op::Fill, DType::Bool);  // its condition
  for (const auto& [op, dt] : needs)
    if (!KernelRegistry::instance().lookup(op, backend.id(), dt).fn)
      return "no " + std::string(op_name(op)) + " kernel for " + std::string(name(dt));
  return "";
}

std::string path_of(const Case& c, const Backend& backend, DType dtype) {
  if (c.named.empty()) return "";
  for (const NamedOpInfo& n : named_ops())
    if (n.name == c.named && n.backend == backend.name() &&
        (n.dtype_mask & (1u << static_cast<int>(dtype))))
      return "kernel";
  return "composite";
}

}  // namespace bp::cli::perf
