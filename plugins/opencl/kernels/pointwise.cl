// Pointwise kernels for one dispatch dtype T (and bool, role B, for masks and
// comparisons). One work-item per element of the output, in the walk's order;
// every kernel has the same arguments so the host sets them in one place.

#if T_IS_FLOAT
#define WRAP_ADD(x, y, al) ((x) + (al) * (y))
#define WRAP_SUB(x, y, al) ((x) - (al) * (y))
#define WRAP_MUL(x, y) ((x) * (y))
#define WRAP_NEG(x) (-(x))
#else
#define WRAP_ADD(x, y, al) ((T_C)((T_U)(x) + (T_U)(al) * (T_U)(y)))
#define WRAP_SUB(x, y, al) ((T_C)((T_U)(x) - (T_U)(al) * (T_U)(y)))
#define WRAP_MUL(x, y) ((T_C)((T_U)(x) * (T_U)(y)))
#define WRAP_NEG(x) ((T_C)((T_U)0 - (T_U)(x)))
#endif

__kernel void fill(POINTWISE_ARGS) {
  BEGIN(1)
  T_STORE(o + p[0], T_SCALAR(s0));
}

#define UNARY(name, expr)               \
  __kernel void name(POINTWISE_ARGS) {  \
    BEGIN(2)                            \
    const T_C x = T_LOAD(a + p[1]);     \
    T_STORE(o + p[0], (expr));          \
  }
#define BINARY(name, expr)              \
  __kernel void name(POINTWISE_ARGS) {  \
    BEGIN(3)                            \
    const T_C x = T_LOAD(a + p[1]);     \
    const T_C y = T_LOAD(b + p[2]);     \
    T_STORE(o + p[0], (expr));          \
  }
#define COMPARE(name, expr)             \
  __kernel void name(POINTWISE_ARGS) {  \
    BEGIN(3)                            \
    const T_C x = T_LOAD(a + p[1]);     \
    const T_C y = T_LOAD(b + p[2]);     \
    B_STORE(o + p[0], (expr));          \
  }

// The scalar form (BP_KERNEL_SCALAR_OPERAND): y is the attribute s1, already
// of T's values (rounded to it on the host), not a second buffer.
#define BINARY_SCALAR(name, expr)       \
  __kernel void name(POINTWISE_ARGS) {  \
    BEGIN(2)                            \
    const T_C x = T_LOAD(a + p[1]);     \
    const T_C y = (T_C)T_SCALAR(s1);    \
    T_STORE(o + p[0], (expr));          \
  }

BINARY(add, WRAP_ADD(x, y, (T_C)T_SCALAR(s0)))
BINARY(sub, WRAP_SUB(x, y, (T_C)T_SCALAR(s0)))
BINARY(mul, WRAP_MUL(x, y))
BINARY_SCALAR(add_s, WRAP_ADD(x, y, (T_C)T_SCALAR(s0)))
BINARY_SCALAR(sub_s, WRAP_SUB(x, y, (T_C)T_SCALAR(s0)))
BINARY_SCALAR(mul_s, WRAP_MUL(x, y))
BINARY(maximum, NAN_MAX(T, x, y))
BINARY(minimum, NAN_MIN(T, x, y))
UNARY(relu, x < (T_C)0 ? (T_C)0 : x)
UNARY(neg, WRAP_NEG(x))
UNARY(abs_, x < (T_C)0 ? WRAP_NEG(x) : x)
COMPARE(eq, x == y)
COMPARE(ne, x != y)
COMPARE(lt, x < y)
COMPARE(le, x <= y)
COMPARE(gt, x > y)
COMPARE(ge, x >= y)
COMPARE(logical_and, x != (T_C)0 && y != (T_C)0)
COMPARE(logical_or, x != (T_C)0 || y != (T_C)0)

__kernel void logical_not(POINTWISE_ARGS) {
  BEGIN(2)
  B_STORE(o + p[0], T_LOAD(a + p[1]) == (T_C)0);
}

// out = cond ? b : c, with the condition (bool) in a.
__kernel void where_(POINTWISE_ARGS) {
  BEGIN(4)
  T_STORE(o + p[0], B_LOAD(a + p[1]) ? T_LOAD(b + p[2]) : T_LOAD(c + p[3]));
}

// iarg bit 0: the lower bound s0 is given; bit 1: the upper bound s1.
// Integers compare in long, so a bound outside the dtype's range (-3 for
// uint8) bounds the value rather than wrapping first.
__kernel void clamp_(POINTWISE_ARGS) {
  BEGIN(2)
#if T_IS_FLOAT
  T_C r = T_LOAD(a + p[1]);
  const T_C lo = (T_C)T_SCALAR(s0), hi = (T_C)T_SCALAR(s1);
#else
  long r = (long)T_LOAD(a + p[1]);
  const long lo = s0, hi = s1;
#endif
  if ((iarg & 1) && r < lo) r = lo;
  if ((iarg & 2) && r > hi) r = hi;
  T_STORE(o + p[0], (T_C)r);
}

#if T_IS_FLOAT
BINARY(div_, x / y)
BINARY_SCALAR(div_s, x / y)
BINARY(pow_, pow(x, y))
UNARY(exp_, exp(x))
UNARY(log_, log(x))
UNARY(sqrt_, sqrt(x))
UNARY(sigmoid, (T_C)1 / ((T_C)1 + exp(-x)))
UNARY(tanh_, tanh(x))
UNARY(erf_, erf(x))
#else
// Exact integer power by squaring, wrapping; a negative exponent is an error
// found on the device, reported at the stream's next synchronisation.
__kernel void pow_(POINTWISE_ARGS) {
  BEGIN(3)
  const T_C base = T_LOAD(a + p[1]);
  T_C e = T_LOAD(b + p[2]);
  if (e < (T_C)0) {
    record_error(err, ERR_NEGATIVE_EXPONENT, (int)iarg, (long)e, 0, 0);
    T_STORE(o + p[0], (T_C)0);
    return;
  }
  T_U result = 1, bb = (T_U)base;
  for (; e > (T_C)0; e >>= 1) {
    if (e & (T_C)1) result *= bb;
    bb *= bb;
  }
  T_STORE(o + p[0], (T_C)result);
}
#endif
