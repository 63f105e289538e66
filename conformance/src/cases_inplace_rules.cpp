// The rules every in-place op follows beyond writing self: broadcasting of
// the other operand (IP-4), the dtype rule (IP-5), overlap (IP-6), the
// version counter (IP-7), aliasing handles (IP-8), and the in-place ops
// users rely on, each returning self and writing self's memory (IP-9).
// A refused op must leave self, its values and its version as they were.
#include <backplane/conformance.h>

#include "case_checks.h"
#include "case_util.h"

namespace bp::conformance {

namespace {

constexpr const char* kCategory = "inplace";

Tensor host_tensor(const Context& ctx, std::vector<double> v, std::vector<int64_t> shape,
                   DType dtype = DType::Float32) {
  return from_vector(v, IntArrayRef(shape), ctx.options(dtype));
}

// IP-4: the other operand broadcasts to self's shape.
void broadcast_other_to_self(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  const Location memory = location(x);
  x.add_(host_tensor(ctx, {10, 20, 30}, {3}));
  BP_EXPECT_VALUES(x, {10, 21, 32, 13, 24, 35});
  x.mul_(host_tensor(ctx, {1, -1}, {2, 1}));
  BP_EXPECT_VALUES(x, {10, 21, 32, -13, -24, -35});
  x.sub_(scalar_tensor(1.0, ctx.options()));
  BP_EXPECT_VALUES(x, {9, 20, 31, -14, -25, -36});
  x.copy_(host_tensor(ctx, {7}, {1, 1}));
  BP_EXPECT_VALUES(x, {7, 7, 7, 7, 7, 7});
  BP_EXPECT_SHAPE(x, {2, 3});
  BP_EXPECT_EQ(location(x), memory);
}

// IP-4: when the broadcast shape is not self's, the op is refused and self
// is left as it was.
void self_shape_never_changes(const Context& ctx) {
  Tensor x = zeros({3}, ctx.options());
  Tensor c = iota(ctx, {2, 1});
  const uint32_t vx = x.version(), vc = c.version();
  BP_EXPECT_THROWS((x.add_(ones({2, 3}, ctx.options()))), ValueError);
  BP_EXPECT_THROWS((c.mul_(ones({2, 3}, ctx.options()))), ValueError);
  BP_EXPECT_THROWS((c.copy_(ones({2, 3}, ctx.options()))), ValueError);
  BP_EXPECT_THROWS((c.sub_(ones({4}, ctx.options()))), ValueError);
  BP_EXPECT_SHAPE(x, {3});
  BP_EXPECT_VALUES(x, {0, 0, 0});
  BP_EXPECT_SHAPE(c, {2, 1});
  BP_EXPECT_VALUES(c, {0, 1});
  BP_EXPECT_EQ(x.version(), vx, "a refused op must not count as a modification");
  BP_EXPECT_EQ(c.version(), vc);
}

// IP-5: a floating result cannot go into an integer or bool self.
void float_into_int_refused(const Context& ctx) {
  Tensor i = full({3}, 4, ctx.options(DType::Int64));
  Tensor f = host_tensor(ctx, {0.5, 1.5, 2.5}, {3});
  const uint32_t v0 = i.version();
  BP_EXPECT_THROWS(i.add_(f), TypeError);
  BP_EXPECT_THROWS(i.mul_(2.5), TypeError);
  BP_EXPECT_THROWS(i += f, TypeError);
  // True division of integers is floating, so it cannot be done in place.
  BP_EXPECT_THROWS(i.div_(full({3}, 2, ctx.options(DType::Int64))), TypeError);
  Tensor i32 = full({3}, 1, ctx.options(DType::Int32));
  BP_EXPECT_THROWS(i32.sub_(f), TypeError);
  Tensor b = full({3}, true, ctx.options(DType::Bool));
  BP_EXPECT_THROWS(b.add_(full({3}, 1, ctx.options(DType::Int64))), TypeError);
  BP_EXPECT_VALUES(i, {4, 4, 4});
  BP_EXPECT_EQ(i.dtype(), DType::Int64);
  BP_EXPECT_EQ(i.version(), v0, "a refused op must not count as a modification");
  BP_EXPECT_VALUES(b, {1, 1, 1});
}

// IP-5: a result of self's category or lower is cast to self's dtype.
void lower_category_allowed(const Context& ctx) {
  Tensor f = host_tensor(ctx, {0.5, 1.5, 2.5}, {3});
  f += full({3}, 2, ctx.options(DType::Int64));
  BP_EXPECT_EQ(f.dtype(), DType::Float32, "self's dtype never changes");
  BP_EXPECT_VALUES(f, {2.5, 3.5, 4.5});
  f.mul_(full({3}, true, ctx.options(DType::Bool)));
  BP_EXPECT_VALUES(f, {2.5, 3.5, 4.5});
  // float32 self with a float64 operand: computed in float64, cast back.
  f.add_(host_tensor(ctx, {0.25, 0.25, 0.25}, {3}, DType::Float64));
  BP_EXPECT_EQ(f.dtype(), DType::Float32);
  BP_EXPECT_VALUES(f, {2.75, 3.75, 4.75});
  Tensor i = host_tensor(ctx, {1, -2, 3}, {3}, DType::Int64);
  i *= 2;
  BP_EXPECT_EQ(i.dtype(), DType::Int64);
  BP_EXPECT_VALUES(i, {2, -4, 6});
  Tensor i32 = host_tensor(ctx, {1, 2, 3}, {3}, DType::Int32);
  i32.add_(host_tensor(ctx, {10, 20, 30}, {3}, DType::Int64));
  BP_EXPECT_EQ(i32.dtype(), DType::Int32);
  BP_EXPECT_VALUES(i32, {11, 22, 33});
}

// IP-6: a tensor whose elements share memory cannot be written.
void expanded_refused(const Context& ctx) {
  Tensor base = iota(ctx, {3, 1});
  Tensor e = base.expand({3, 4});
  const uint32_t v0 = base.version();
  BP_EXPECT_THROWS(e.add_(1), ValueError);
  BP_EXPECT_THROWS(e.mul_(ones({3, 4}, ctx.options())), ValueError);
  BP_EXPECT_THROWS(e.fill_(0), ValueError);
  BP_EXPECT_THROWS(e.zero_(), ValueError);
  BP_EXPECT_THROWS(e.copy_(ones({3, 4}, ctx.options())), ValueError);
  BP_EXPECT_THROWS(e.relu_(), ValueError);
  BP_EXPECT_VALUES(base, {0, 1, 2});
  BP_EXPECT_EQ(base.version(), v0);
  // The message points to the standard fix.
  std::string msg = BP_ERROR_MESSAGE(ValueError, e.add_(1));
  BP_EXPECT_MENTIONS(msg, "clone");
}

// IP-6: an input that partially overlaps self is refused.
void partial_overlap_refused(const Context& ctx) {
  Tensor x = iota(ctx, {5});
  Tensor tail = x.index({Slice(1, None)}), head = x.index({Slice(None, -1)});
  const uint32_t v0 = x.version();
  BP_EXPECT_THROWS(tail.add_(head), ValueError);
  BP_EXPECT_THROWS(head.copy_(tail), ValueError);
  BP_EXPECT_THROWS(tail.mul_(head), ValueError);
  Tensor m = iota(ctx, {3, 3});
  BP_EXPECT_THROWS(m.add_(m.t()), ValueError);
  BP_EXPECT_VALUES(x, {0, 1, 2, 3, 4});
  BP_EXPECT_VALUES(m, host_iota(9));
  BP_EXPECT_EQ(x.version(), v0);
  std::string msg = BP_ERROR_MESSAGE(ValueError, tail.add_(head));
  BP_EXPECT_MENTIONS(msg, "clone");
  // With a copy of the input the same update is allowed.
  tail.add_(head.clone());
  BP_EXPECT_VALUES(x, {0, 1, 3, 5, 7});
}

// IP-6: exactly self as the input is allowed; so are disjoint parts of one
// memory, interleaved or not.
void self_and_disjoint_allowed(const Context& ctx) {
  Tensor x = host_tensor(ctx, {1, -2, 3}, {3});
  x.add_(x);
  BP_EXPECT_VALUES(x, {2, -4, 6});
  x.mul_(x);
  BP_EXPECT_VALUES(x, {4, 16, 36});
  Tensor y = iota(ctx, {6});
  Tensor v = y.index({Slice(2, None)});
  v.sub_(y.index({Slice(2, None)}));  // another handle on the same elements
  BP_EXPECT_VALUES(y, {0, 1, 0, 0, 0, 0});
  Tensor z = iota(ctx, {6});
  z.index({Slice(None, 3)}).add_(z.index({Slice(3, None)}));
  BP_EXPECT_VALUES(z, {3, 5, 7, 3, 4, 5});
  Tensor w = iota(ctx, {6});
  w.index({Slice(None, None, 2)}).add_(w.index({Slice(1, None, 2)}));
  BP_EXPECT_VALUES(w, {1, 1, 5, 3, 9, 5});
}

// IP-7: each in-place op adds one to the version; nothing else does.
void version_bumped_by_each_op(const Context& ctx) {
  Tensor x = host_tensor(ctx, {1, -2, 3, 4}, {4});
  Tensor o = host_tensor(ctx, {1, 1, 1, 1}, {4});
  Tensor index = from_vector(std::vector<int64_t>{0}, {1}, ctx.options(DType::Int64));
  struct Step {
    const char* name;
    std::function<void()> run;
  };
  const Step steps[] = {
      {"add_", [&] { x.add_(o); }},
      {"add_ alpha", [&] { x.add_(o, 2); }},
      {"sub_", [&] { x.sub_(o); }},
      {"mul_", [&] { x.mul_(2); }},
      {"div_", [&] { x.div_(o); }},
      {"+=", [&] { x += 1; }},
      {"-=", [&] { x -= o; }},
      {"*=", [&] { x *= o; }},
      {"/=", [&] { x /= 1; }},
      {"fill_", [&] { x.fill_(3); }},
      {"zero_", [&] { x.zero_(); }},
      {"copy_", [&] { x.copy_(o); }},
      {"relu_", [&] { x.relu_(); }},
      {"clamp_", [&] { x.clamp_(0, 2); }},
      {"scatter_", [&] { x.scatter_(0, index, 5.0); }},
  };
  uint32_t expected = x.version();
  const uint32_t vo = o.version();
  for (const Step& s : steps) {
    s.run();
    ++expected;
    BP_EXPECT_EQ(x.version(), expected, "after ", s.name);
  }
  BP_EXPECT_EQ(o.version(), vo, "an operand is read, not modified");
}

// IP-7: a base and all its views share one counter.
void version_shared_by_views(const Context& ctx) {
  Tensor x = iota(ctx, {3, 4});
  Tensor row = x[1], col = x.index({Slice(), 2}), tv = x.t(), vv = x.t()[0];
  const uint32_t v0 = x.version();
  row.add_(1);
  for (const Tensor* t : {&x, &row, &col, &tv, &vv}) BP_EXPECT_EQ(t->version(), v0 + 1);
  x.mul_(2);
  for (const Tensor* t : {&x, &row, &col, &tv, &vv}) BP_EXPECT_EQ(t->version(), v0 + 2);
  vv.zero_();
  for (const Tensor* t : {&x, &row, &col, &tv, &vv}) BP_EXPECT_EQ(t->version(), v0 + 3);
}

// IP-7: out-of-place ops, copies and reads leave the version alone.
void version_unchanged_by_reads(const Context& ctx) {
  Tensor x = iota(ctx, {2, 3});
  Tensor y = iota(ctx, {2, 3});
  const uint32_t vx = x.version(), vy = y.version();
  (void)(x + y);
  (void)(x * 2);
  (void)relu(x);
  (void)x.sum();
  (void)x.t().contiguous();
  (void)x.clone();
  (void)x.to(DType::Float64);
  (void)x.to_vector<double>();
  (void)x[1][2].item<double>();
  (void)x.index({Slice(), 1});
  (void)x.to_string();
  Tensor z = zeros({2, 3}, ctx.options());
  const uint32_t vz = z.version();
  z.copy_(x);  // x is the source: only z is modified
  BP_EXPECT_EQ(x.version(), vx);
  BP_EXPECT_EQ(y.version(), vy);
  BP_EXPECT_EQ(z.version(), vz + 1);
}

// IP-8: copying a handle aliases.
void handle_copy_aliases(const Context& ctx) {
  Tensor a = iota(ctx, {3});
  Tensor b = a;
  BP_EXPECT(b.is_same(a));
  b.add_(1);
  BP_EXPECT_VALUES(a, {1, 2, 3});
  a.mul_(2);
  BP_EXPECT_VALUES(b, {2, 4, 6});
  Tensor c;
  c = b;
  c.zero_();
  BP_EXPECT_VALUES(a, {0, 0, 0});
  BP_EXPECT_EQ(a.version(), c.version());
  BP_EXPECT_EQ(location(a), location(c));
}

// IP-9: each op on a column view of a 3x3 (stride 3, offset 1) returns the
// same handle, writes in place, bumps the version, leaves the rest alone.
struct Ip9Op {
  const char* name;
  std::function<Tensor&(Tensor&, const Context&)> apply;
  std::vector<double> column;  // the column afterwards; it starts at {1, 4, 7}
};

const std::vector<Ip9Op>& ip9_ops() {
  static const std::vector<Ip9Op> ops = {
      {"add_alpha",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.add_(host_tensor(c, {1, 2, 3}, {3}), 2);
       },
       {3, 8, 13}},
      {"sub_",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.sub_(host_tensor(c, {1, 2, 3}, {3}));
       },
       {0, 2, 4}},
      {"sub_alpha",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.sub_(host_tensor(c, {1, 2, 3}, {3}), 3);
       },
       {-2, -2, -2}},
      {"mul_broadcast",
       [](Tensor& s, const Context& c) -> Tensor& { return s.mul_(host_tensor(c, {-2}, {1})); },
       {-2, -8, -14}},
      {"div_",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.div_(host_tensor(c, {2, 4, -7}, {3}));
       },
       {0.5, 1, -1}},
      {"fill_",
       [](Tensor& s, const Context&) -> Tensor& { return s.fill_(-3.5); },
       {-3.5, -3.5, -3.5}},
      {"copy_broadcast_convert",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.copy_(full({1}, 9, c.options(DType::Int64)));
       },
       {9, 9, 9}},
      {"copy_from_float64",
       [](Tensor& s, const Context& c) -> Tensor& {
         return s.copy_(host_tensor(c, {0.5, -1, 2.25}, {3}, DType::Float64));
       },
       {0.5, -1, 2.25}},
      {"clamp_", [](Tensor& s, const Context&) -> Tensor& { return s.clamp_(2, 5); }, {2, 4, 5}},
      {"clamp_min",
       [](Tensor& s, const Context&) -> Tensor& { return s.clamp_(4, std::nullopt); },
       {4, 4, 7}},
      {"relu_",
       [](Tensor& s, const Context&) -> Tensor& {
         s.sub_(4);  // {-3, 0, 3}
         return s.relu_();
       },
       {0, 0, 3}},
      {"scatter_src",
       [](Tensor& s, const Context& c) -> Tensor& {
         Tensor index = from_vector(std::vector<int64_t>{2, 0}, {2}, c.options(DType::Int64));
         return s.scatter_(0, index, host_tensor(c, {-1, -2, -3}, {3}));
       },
       {-2, 4, -1}},
      {"scatter_value",
       [](Tensor& s, const Context& c) -> Tensor& {
         Tensor index = from_vector(std::vector<int64_t>{1}, {1}, c.options(DType::Int64));
         return s.scatter_(0, index, 8.0);
       },
       {1, 8, 7}},
  };
  return ops;
}

void check_ip9(const Context& ctx, const Ip9Op& op) {
  Tensor m = iota(ctx, {3, 3});
  Tensor col = m.index({Slice(), 1});
  Tensor alias = col;
  const Location memory = location(col);
  const uint32_t v0 = m.version();
  Tensor& r = op.apply(col, ctx);
  BP_EXPECT(&r == &col, op.name, " must return a reference to self");
  BP_EXPECT(r.is_same(alias), op.name, " must return self, not a new tensor");
  BP_EXPECT_EQ(location(col), memory, op.name, " must write self's memory");
  BP_EXPECT(m.version() > v0, op.name, " must bump the version");
  BP_EXPECT_EQ(col.dtype(), DType::Float32);
  BP_EXPECT_VALUES(col, op.column);
  std::vector<double> expected = host_iota(9);
  for (int i = 0; i < 3; ++i) expected[3 * i + 1] = op.column[i];
  BP_EXPECT_VALUES(m, expected);
}

// IP-9 on 2-D: scatter_ along dim 1 and dim 0, by hand.
void scatter_2d(const Context& ctx) {
  Tensor s = zeros({2, 3}, ctx.options());
  Tensor index = from_vector(std::vector<int64_t>{2, 0, 1, 2}, {2, 2}, ctx.options(DType::Int64));
  Tensor src = host_tensor(ctx, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor& r = s.scatter_(1, index, src);  // s[i][index[i][j]] = src[i][j]
  BP_EXPECT(&r == &s);
  BP_EXPECT_VALUES(s, {2, 0, 1, 0, 4, 5});
  Tensor t = zeros({2, 3}, ctx.options());
  Tensor i0 = from_vector(std::vector<int64_t>{1, 0, 1}, {1, 3}, ctx.options(DType::Int64));
  t.scatter_(0, i0, src);  // t[i0[0][j]][j] = src[0][j]
  BP_EXPECT_VALUES(t, {0, 2, 0, 1, 0, 3});
  t.scatter_(1, from_vector(std::vector<int64_t>{0, 0}, {2, 1}, ctx.options(DType::Int64)), -1.0);
  BP_EXPECT_VALUES(t, {-1, 2, 0, -1, 0, 3});
}

// The example of IP-9: y = x.zero_() is x.
void zero_returns_same_tensor(const Context& ctx) {
  Tensor x = iota(ctx, {4});
  Tensor y = x.zero_();
  BP_EXPECT(y.is_same(x), "y = x.zero_() must be x itself");
  y.fill_(2);
  BP_EXPECT_VALUES(x, {2, 2, 2, 2});
}

// IP-9: copy_ converts device as well (through the backends' copies).
void copy_across_devices(const Context& ctx) {
  const Device other = second_device(ctx);
  Tensor x = zeros({2, 2}, ctx.options());
  Tensor src = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2},
                           TensorOptions(DType::Int64).device(other));
  Tensor& r = x.copy_(src);
  BP_EXPECT(&r == &x);
  BP_EXPECT_EQ(x.device(), ctx.device());
  BP_EXPECT_VALUES(x, {1, 2, 3, 4});
  Tensor back = zeros({2}, TensorOptions(DType::Float64).device(other));
  back.copy_(x[1]);
  BP_EXPECT_VALUES(back, {3, 4});
  Tensor row = zeros({2, 3}, ctx.options());
  row.copy_(from_vector(std::vector<double>{5, 6, 7}, {3}, TensorOptions().device(other)));
  BP_EXPECT_VALUES(row, {5, 6, 7, 5, 6, 7});
}

}  // namespace

void add_inplace_rule_cases(Suite& suite) {
  auto add = [&suite](const char* name, std::vector<std::string> ids, void (*fn)(const Context&)) {
    suite.add({std::string("inplace.") + name, std::move(ids), kCategory, fn});
  };
  add("broadcast.other_to_self", {"IP-4"}, broadcast_other_to_self);
  add("broadcast.self_shape_never_changes", {"IP-4"}, self_shape_never_changes);
  add("dtype.float_into_int_refused", {"IP-5"}, float_into_int_refused);
  add("dtype.lower_category_cast", {"IP-5"}, lower_category_allowed);
  add("overlap.expanded_refused", {"IP-6"}, expanded_refused);
  add("overlap.partial_refused", {"IP-6"}, partial_overlap_refused);
  add("overlap.self_and_disjoint_allowed", {"IP-6"}, self_and_disjoint_allowed);
  add("version.each_inplace_op", {"IP-7"}, version_bumped_by_each_op);
  add("version.shared_by_views", {"IP-7"}, version_shared_by_views);
  add("version.unchanged_by_reads", {"IP-7"}, version_unchanged_by_reads);
  add("alias.handle_copy", {"IP-8"}, handle_copy_aliases);
  for (const auto& op : ip9_ops())
    suite.add({std::string("inplace.ip9.") + op.name,
               {"IP-9", "IP-1"},
               kCategory,
               [&op](const Context& ctx) { check_ip9(ctx, op); }});
  add("ip9.scatter_2d", {"IP-9"}, scatter_2d);
  add("ip9.zero_returns_same_tensor", {"IP-9", "IP-1"}, zero_returns_same_tensor);
  add("ip9.copy_across_devices", {"IP-9", "DV-1"}, copy_across_devices);
}

}  // namespace bp::conformance
