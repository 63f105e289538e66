/*
 * Backplane plugin ABI: the only boundary between the core and a backend.
 *
 * Plain C: structs and tables of function pointers that carry a `void* ctx`.
 * No C++ type, exception or allocation ownership crosses this line.
 *
 * Versioning
 *   - Every struct begins with `struct_size`, set by whoever fills the struct
 *     to sizeof() as compiled on its side.
 *   - BP_ABI_MAJOR changes when a field moves or changes meaning; the core
 *     refuses a plugin with another major.
 *   - BP_ABI_MINOR grows when fields are appended (marked "(since 2.N)").
 *     Minors mix in both directions. The core accepts an older minor and
 *     treats every field past the plugin's `struct_size` as absent
 *     (BP_HAS_FIELD below); it accepts a newer minor and ignores the fields
 *     it does not know. A plugin reads `bp_host.abi_minor` to learn the
 *     core's, checks `struct_size` before reading a field of a struct the
 *     core filled, and writes into a struct the core owns (device props,
 *     memory stats) only the bytes its `struct_size` covers.
 *
 * A plugin exports exactly one symbol, BP_PLUGIN_ENTRY_SYMBOL. The core calls
 * it, checks the version it reports, then asks it to register its kernels
 * through a registrar. Nothing needs to run before that call: no static
 * initialisers, no work at dlopen time.
 *
 * Instances
 *   The entry point may be called more than once in one process, each call
 *   making an independent instance with its own `ctx`: a backend unloaded
 *   while its tensors live and loaded again runs beside the first instance
 *   until that one's tensors go. Loading a library that is already loaded,
 *   by its name, its path or another path to the same file, gives back the
 *   backend made from it and calls nothing. Instances may live at the same
 *   time, on any threads. `destroy(ctx)` releases only
 *   what that instance owns: state shared by the instances of a library
 *   (a process-wide driver context, a memory pool) is reference-counted and
 *   released by the last instance, never by the first to go.
 */
#ifndef BACKPLANE_PLUGIN_H
#define BACKPLANE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_ABI_MAJOR 2
#define BP_ABI_MINOR 10

#define BP_PLUGIN_ENTRY_SYMBOL "bp_plugin_init"

#if defined(_WIN32)
#define BP_PLUGIN_EXPORT __declspec(dllexport)
#else
#define BP_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when a struct filled by the other side is large enough to hold FIELD. */
#define BP_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Maximum rank of a tensor crossing the boundary. */
#define BP_MAX_DIMS 8

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef enum bp_status {
  BP_STATUS_OK = 0,
  BP_STATUS_INVALID_ARGUMENT = 1, /* the call broke a rule the kernel checks */
  BP_STATUS_UNSUPPORTED = 2,      /* this op/dtype/layout is not implemented; a
                                     kernel returning it must not have written
                                     its outputs: the core applies the fallback
                                     policy (--fallback) to the call */
  BP_STATUS_OUT_OF_MEMORY = 3,    /* an allocation failed */
  BP_STATUS_RUNTIME_ERROR = 4,    /* anything else (an exception, a driver error) */
  BP_STATUS_NOT_READY = 5,        /* event_query: the work is still running */
  BP_STATUS_DEVICE_ERROR = 6      /* work already enqueued failed on the device (an
                                     index out of range found by a kernel): returned
                                     by a synchronisation, see "Asynchrony" */
} bp_status;

/* Where a failing call writes its message. The core owns the buffer. */
typedef struct bp_error {
  size_t struct_size;
  char* message;   /* NUL-terminated text is written here; may be NULL */
  size_t capacity; /* bytes available at `message`, NUL included */
} bp_error;

/* ------------------------------------------------------------------------ */
/* Data types and tensor descriptors (binary-identical to DLPack's DLTensor) */
/* ------------------------------------------------------------------------ */

/* The dtypes the core knows; also the dispatch key of a kernel. In
 * bp_tensor.dtype (DLPack codes): bool {6, 8}, int8/16/32/64 {0, bits},
 * uint8 {1, 8}, float16/32/64 {2, bits}, bfloat16 {4, 16}; lanes 1. */
typedef enum bp_dtype {
  BP_DTYPE_BOOL = 0,
  BP_DTYPE_INT32 = 1,
  BP_DTYPE_INT64 = 2,
  BP_DTYPE_FLOAT32 = 3,
  BP_DTYPE_FLOAT64 = 4,
  BP_DTYPE_FLOAT16 = 5,  /* IEEE binary16 */
  BP_DTYPE_BFLOAT16 = 6, /* float32's exponent, 8-bit significand */
  BP_DTYPE_INT8 = 7,
  BP_DTYPE_UINT8 = 8,
  BP_DTYPE_INT16 = 9,
  BP_DTYPE_COUNT = 10
} bp_dtype;

/* Bit for `dtype` in a registration's dtype mask. */
#define BP_DTYPE_BIT(dtype) (1u << (unsigned)(dtype))
#define BP_DTYPE_MASK_ALL ((1u << BP_DTYPE_COUNT) - 1u)

/* DLPack's DLDataType: code (0 int, 1 uint, 2 float, 6 bool), bits, lanes. */
typedef struct bp_dl_dtype {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} bp_dl_dtype;

/* DLPack's DLDevice: the plugin declares its device_type (1 CPU, 2 CUDA, ...). */
typedef struct bp_dl_device {
  int32_t device_type;
  int32_t device_id;
} bp_dl_device;

/*
 * A strided tensor, laid out exactly as DLPack's DLTensor, so that a plugin
 * may hand it to any DLPack consumer. The core always fills `strides`
 * (in elements, never NULL) and may use 0 for broadcast dimensions.
 * `data` is the handle allocate() returned, unchanged (DLPack's rule for
 * cl_mem and the like); the first element is byte_offset bytes into it.
 */
typedef struct bp_tensor {
  void* data;
  bp_dl_device device;
  int32_t ndim;
  bp_dl_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} bp_tensor;

/* ------------------------------------------------------------------------ */
/* Operations                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Primitive operations a plugin may register. The core builds every other op
 * (mean, softmax's backward, clone, views, ...) from these. New ops are
 * appended with a minor version bump; an op a plugin does not register is
 * "unsupported" for it.
 *
 * Conventions, unless an op says otherwise:
 *   - inputs arrive broadcast to the output's shape (stride 0 on broadcast
 *     dims) and cast to one dtype, the dispatch dtype (inputs[0]'s);
 *   - any operand may be non-contiguous, offset, or (inputs only) expanded;
 *     an output may be exactly an input (in place) but never overlaps one
 *     partially;
 *   - outputs are allocated by the core; a kernel writes every element.
 *
 * The list: one X(NAME, Name, "name", value) per op, which is BP_OP_NAME =
 * value in bp_op below, bp::Op::Name in the core and "name" in every message
 * and listing. A new op is one line here (value: the next number, also
 * BP_OP_COUNT's) plus its contract comment; the core and the SDK take every
 * list of ops from this one.
 */
/* clang-format off */
#define BP_OP_LIST(X)                                                                             \
  /* --- data movement and factories ------------------------------------- */                     \
  X(FILL, Fill, "fill", 0) /* out[0] = scalars[0]; no inputs; dispatch dtype: out[0]'s */         \
  X(COPY, Copy, "copy", 1) /* out[0] = cast(in[0]); any dtype pair (to bool: x != 0;              \
      float to integer truncates; integers wrap) */                                               \
  /* --- binary arithmetic: all operands of the dispatch dtype -------------- */                  \
  X(ADD, Add, "add", 2) /* in0 + scalars[0] * in1 (scalars[0] = alpha) */                         \
  X(SUB, Sub, "sub", 3) /* in0 - scalars[0] * in1 */                                              \
  X(MUL, Mul, "mul", 4) /* in0 * in1 */                                                           \
  X(DIV, Div, "div", 5) /* in0 / in1, true division (floating dtypes) */                          \
  /* --- unary ------------------------------------------------------------ */                    \
  X(RELU, Relu, "relu", 6) /* max(in0, 0) */                                                      \
  /* --- reductions -------------------------------------------------------- */                   \
  X(SUM, Sum, "sum", 7) /* out has in0's rank, reduced dims of size 1; int64 out for              \
      bool/integer in0, in0's dtype for floating */                                               \
  /* --- linear algebra ---------------------------------------------------- */                   \
  X(MATMUL, Matmul, "matmul", 8) /* out[..., m, n] = in0[..., m, k] @ in1[..., k, n]; batch       \
      dims broadcast (stride 0); floating dtypes */                                               \
  /* --- unary, out dtype = in dtype (floating ops: floating dtypes only) --- */                  \
  X(NEG, Neg, "neg", 9)                                                                           \
  X(ABS, Abs, "abs", 10)                                                                          \
  X(EXP, Exp, "exp", 11)                                                                          \
  X(LOG, Log, "log", 12)                                                                          \
  X(SQRT, Sqrt, "sqrt", 13)                                                                       \
  X(SIGMOID, Sigmoid, "sigmoid", 14)                                                              \
  X(TANH, Tanh, "tanh", 15)                                                                       \
  X(CLAMP, Clamp, "clamp", 16) /* min(max(in0, lo), hi): scalars[0] = lo, scalars[1] = hi;        \
      ints[0] bit 0: lo given, bit 1: hi given */                                                 \
  X(LOGICAL_NOT, LogicalNot, "logical_not", 17) /* out bool = !in0 (any input dtype) */           \
  /* --- binary, same-dtype inputs ------------------------------------------ */                  \
  X(MAXIMUM, Maximum, "maximum", 18) /* max(in0, in1), NaN propagates */                          \
  X(MINIMUM, Minimum, "minimum", 19) /* min(in0, in1), NaN propagates */                          \
  X(POW, Pow, "pow", 20) /* in0 ** in1 (integers: exact, negative exponent is an error) */        \
  X(EQ, Eq, "eq", 21) /* comparisons: out bool */                                                 \
  X(NE, Ne, "ne", 22)                                                                             \
  X(LT, Lt, "lt", 23)                                                                             \
  X(LE, Le, "le", 24)                                                                             \
  X(GT, Gt, "gt", 25)                                                                             \
  X(GE, Ge, "ge", 26)                                                                             \
  X(LOGICAL_AND, LogicalAnd, "logical_and", 27) /* out bool = (in0 != 0) && (in1 != 0) */         \
  X(LOGICAL_OR, LogicalOr, "logical_or", 28) /* out bool = (in0 != 0) || (in1 != 0) */            \
  X(WHERE, Where, "where", 29) /* out = in0 ? in1 : in2; in0 bool; dispatch dtype: in1's */       \
  /* --- reductions over the dims where out has size 1 and in0 does not ---- */                   \
  X(PROD, Prod, "prod", 30) /* out dtype as for SUM */                                            \
  X(MAX, Max, "max", 31) /* out dtype = in0's; NaN propagates; never empty */                     \
  X(MIN, Min, "min", 32)                                                                          \
  X(ARGMAX, Argmax, "argmax", 33) /* over the single dim ints[0]; out int64 with that dim of      \
      size 1; first occurrence wins; NaN counts as maximal */                                     \
  X(ARGMIN, Argmin, "argmin", 34)                                                                 \
  /* --- along one dim ------------------------------------------------------ */                  \
  X(SOFTMAX, Softmax, "softmax", 35) /* over dim ints[0]; out shape = in0's; floating */          \
  X(LOG_SOFTMAX, LogSoftmax, "log_softmax", 36)                                                   \
  X(GATHER, Gather, "gather", 37) /* out[i][j] = in0[index(i,j) along dim ints[0]] with           \
      in1 = index (int64, out's shape); dispatch: in0's */                                        \
  X(SCATTER, Scatter, "scatter", 38) /* out is self, written in place: out[in0[i] along dim       \
      ints[0]] = in1[i]; in0 index int64, in1 src of index's                                      \
      shape (stride 0 for a scalar value); dispatch: in1's;                                       \
      ints[1] = reduction: 0 none (last write wins),                                              \
      1 add (out[...] += in1[i], every duplicate counted) */                                      \
  X(INDEX_SELECT, IndexSelect, "index_select", 39) /* out = in0 selected along dim ints[0] by in1 \
      (1-D int64); dispatch: in0's */                                                             \
  /* --- random numbers ------------------------------------------------------- */                \
  X(RANDOM, Random, "random", 40) /* no inputs; out[k] for the k-th element in row-major          \
      order = Philox4x32-10 stream value (seed, offset + k):                                      \
      ints[0] = 0 uniform [0,1), 1 standard normal;                                               \
      ints[1] = seed, ints[2] = offset (see docs/random.md) */                                    \
  /* --- unary, floating (since 2.2: a 2.1 core refuses it at registration;                       \
   *     register it when bp_host.abi_minor >= 2) --------------------------- */                  \
  X(ERF, Erf, "erf", 41) /* erf(in0), the Gaussian error function */                              \
  /* --- along one dim (since 2.8: register them when bp_host.abi_minor >= 8)                     \
   *     ints[0] = the dim; a 0-d input arrives as shape [1] -------------- */                    \
  X(ARGSORT, Argsort, "argsort", 42) /* out[0] int64 of in0's shape: for each line along the      \
      dim, the positions of its elements in sorted order;                                         \
      ints[1] = 1: descending. Stable: equal elements keep                                        \
      their order (-0.0 equals 0.0). NaN is greater than                                          \
      every number: last ascending, first descending;                                             \
      bool: false < true. Any dtype */                                                            \
  X(CUMSUM, Cumsum, "cumsum", 43) /* inclusive running sum along the dim; out int64 for           \
      bool and integer in0 (sums wrap), in0's dtype for                                           \
      floating (which may be summed in any order and in a                                         \
      wider dtype); out has in0's shape */                                                        \
  /* end of BP_OP_LIST */
/* clang-format on */

typedef enum bp_op {
#define BP_OP_ENUMERATOR_(NAME, Name, text, value) BP_OP_##NAME = value,
  BP_OP_LIST(BP_OP_ENUMERATOR_)
#undef BP_OP_ENUMERATOR_
      BP_OP_COUNT = 44,
  /* The `op` of a call to a named kernel (see bp_named_kernel_registration):
   * not an op a plugin registers with register_kernel. */
  BP_OP_NAMED = 4096
} bp_op;

/* BP_OP_COUNT is the length of BP_OP_LIST (the core also checks that the
 * values run 0, 1, ..., BP_OP_COUNT - 1 in the list's order). */
#define BP_OP_PLUS_ONE_(NAME, Name, text, value) +1
#if defined(__cplusplus)
static_assert(BP_OP_COUNT == 0 BP_OP_LIST(BP_OP_PLUS_ONE_), "BP_OP_COUNT != entries of BP_OP_LIST");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(BP_OP_COUNT == 0 BP_OP_LIST(BP_OP_PLUS_ONE_),
               "BP_OP_COUNT != entries of BP_OP_LIST");
#endif
#undef BP_OP_PLUS_ONE_

/* A scalar operand, tagged with the dtype it was given in. */
typedef struct bp_scalar {
  int32_t dtype; /* bp_dtype: BOOL and INT* use `i`, FLOAT* use `f` */
  int32_t reserved;
  union {
    double f;
    int64_t i;
  } value;
} bp_scalar;

#define BP_MAX_SCALARS 4
#define BP_MAX_INTS 16

/* Plain attributes of one call; what each slot means is stated per op above. */
typedef struct bp_attrs {
  size_t struct_size;
  int32_t num_scalars;
  int32_t num_ints;
  bp_scalar scalars[BP_MAX_SCALARS];
  int64_t ints[BP_MAX_INTS];
} bp_attrs;

/* A queue of work on one device (see "Asynchrony"); NULL is the device's
 * default stream. Made by stream_create, owned by the plugin. */
typedef struct bp_stream_impl* bp_stream;
/* A marker in a stream's work (see "Asynchrony"). Made by event_create. */
typedef struct bp_event_impl* bp_event;

/* One kernel invocation. Outputs are allocated by the core before the call.
 * The descriptors, shapes, strides and attributes are valid only until the
 * kernel returns: a kernel that runs later copies what it needs. */
typedef struct bp_kernel_call {
  size_t struct_size;
  int32_t op;    /* bp_op */
  int32_t dtype; /* the dispatch dtype this kernel was chosen for */
  int32_t num_inputs;
  int32_t num_outputs;
  const bp_tensor* inputs;
  const bp_tensor* outputs;
  const bp_attrs* attrs; /* never NULL */
  int32_t device;        /* the device every operand is on */
  int32_t reserved;
  bp_stream stream; /* the stream to enqueue the work on */
} bp_kernel_call;

/* A kernel: enqueues the call's work on call->stream and returns a status;
 * on failure it writes a message to `error`. It checks its arguments and
 * decides whether it supports the call before it returns (an error or
 * UNSUPPORTED then means nothing was enqueued); only failures that depend
 * on values in device memory may be reported later (see "Asynchrony"). */
typedef bp_status (*bp_kernel_fn)(void* kernel_ctx, const bp_kernel_call* call, bp_error* error);

/* ------------------------------------------------------------------------ */
/* Registration                                                              */
/* ------------------------------------------------------------------------ */

/* bp_kernel_registration.flags */
#define BP_KERNEL_EMULATED                                 \
  1u /* computes in a wider dtype and rounds (e.g. float16 \
        through float32): the capability table says so */
/* (since 2.5) An ADD, SUB, MUL or DIV kernel that also takes its second
 * operand as an attribute: a tensor-scalar op (`x + 2.0`, `g.mul(lr)`) then
 * calls it with one input, the scalar in scalars[1] (scalars[0] keeps its
 * meaning: alpha for ADD and SUB, 1 when not given). The kernel converts
 * scalars[1] to the dispatch dtype as FILL converts its value and computes
 * exactly what it would with a broadcast operand of that value: no device
 * tensor, fill or allocation per scalar. A core before 2.5 ignores the flag
 * and never calls the one-input form. A kernel may still decline the form
 * (UNSUPPORTED); the core then makes the operand a tensor and calls again.
 * bp::sdk::Registrar::add_scalar_operand registers a host-memory kernel
 * with it, unchanged (sdk/plugin.hpp). */
#define BP_KERNEL_SCALAR_OPERAND 2u

typedef struct bp_kernel_registration {
  size_t struct_size;
  int32_t op;          /* bp_op */
  uint32_t dtype_mask; /* BP_DTYPE_BIT()s this kernel accepts */
  bp_kernel_fn fn;
  void* kernel_ctx;   /* passed back to fn (optional, may be NULL) */
  const char* origin; /* "file:line" of the registration, shown in errors (optional) */
  uint32_t flags;     /* BP_KERNEL_* */
  uint32_t reserved;
} bp_kernel_registration;

/*
 * A named op of the plugin's own: "vendor::name", which users
 * call through the core with bp::call_op, beside the primitive ops.
 *
 * `schema` declares the operands, in order, and the outputs:
 *     "(Tensor x, Tensor y, float alpha, int n, bool exact) -> Tensor"
 *     "(Tensor x) -> (Tensor, Tensor)"
 * Tensors become the call's inputs in their order, int and bool attributes
 * its ints[] (bool as 0 or 1), float attributes its scalars[] (as float64);
 * at most 8 input and 8 output tensors, BP_MAX_INTS ints and BP_MAX_SCALARS
 * floats. Two schemas are the same when their types are (names and spaces
 * aside). The core
 * checks every call against the schema before the kernel runs: operand
 * counts and kinds, one device for all tensors, and the dispatch dtype (the
 * first input's) in `dtype_mask`. Outputs are allocated by the caller, or by
 * the core with the first input's shape, dtype and device. A named kernel
 * receives `op` = BP_OP_NAMED; declining a call (UNSUPPORTED) is an error
 * for it, as there is no reference to fall back on. Named ops have no
 * gradient: the core refuses a call whose inputs require one.
 *
 * The namespace "core" is the core's: a backend may register there only an
 * override of one of the core's composite ops (bp::overridable_composites()
 * lists them with their contracts; the BP_SCHEMA_CORE_* strings below give
 * their schemas). The core runs such a kernel in place of the composite:
 * silu, gelu, layer_norm, batch_norm_inference and sparse_mm (since 2.6)
 * when no gradient is being recorded; sgd_step and adam_step (since 2.7) in
 * the optimisers' step(), on the parameter and its state; the others (conv2d, the pools, training
 * batch_norm, and their backward halves) whether or not one is, their gradients being defined by
 * the core. When a kernel declines a call, the composite runs. A core older
 * than an override refuses its name: register it only when
 * bp_host.abi_minor is at least the minor that added it. A core newer than
 * 2.5 ignores an override of a later minor than its own (the composite runs).
 */
#define BP_SCHEMA_CORE_SILU "(Tensor x) -> Tensor"
#define BP_SCHEMA_CORE_GELU "(Tensor x, int tanh_approximation) -> Tensor"
#define BP_SCHEMA_CORE_LAYER_NORM \
  "(Tensor x, Tensor weight, Tensor bias, int normalized_dims, float eps) -> Tensor"
#define BP_SCHEMA_CORE_CONV2D                                                                 \
  "(Tensor x, Tensor weight, Tensor bias, int stride_h, int stride_w, int pad_h, int pad_w, " \
  "int dilation_h, int dilation_w, int groups) -> Tensor"
#define BP_SCHEMA_CORE_CONV2D_BACKWARD                                                            \
  "(Tensor grad_out, Tensor x, Tensor weight, int stride_h, int stride_w, int pad_h, int pad_w, " \
  "int dilation_h, int dilation_w, int groups, int output_mask) -> (Tensor, Tensor)"
#define BP_SCHEMA_CORE_MAX_POOL2D                                                             \
  "(Tensor x, int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w, " \
  "int dilation_h, int dilation_w) -> (Tensor, Tensor)"
#define BP_SCHEMA_CORE_AVG_POOL2D                                                             \
  "(Tensor x, int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int pad_w, " \
  "int count_include_pad) -> Tensor"
#define BP_SCHEMA_CORE_AVG_POOL2D_BACKWARD                                                    \
  "(Tensor grad_out, int kernel_h, int kernel_w, int stride_h, int stride_w, int pad_h, int " \
  "pad_w, "                                                                                   \
  "int count_include_pad) -> Tensor"
#define BP_SCHEMA_CORE_BATCH_NORM \
  "(Tensor x, Tensor weight, Tensor bias, float eps) -> (Tensor, Tensor, Tensor)"
#define BP_SCHEMA_CORE_BATCH_NORM_INFERENCE                                                        \
  "(Tensor x, Tensor weight, Tensor bias, Tensor running_mean, Tensor running_var, float eps) -> " \
  "Tensor"
/* (since 2.6) A sparse COO matrix [rows, k] (no dense dims) times a dense
 * [k, m]: `values` [nnz], `indices` int64 [2, nnz] sorted by row then column
 * with no duplicate (coalesced), into a caller-allocated [rows, m]. */
#define BP_SCHEMA_CORE_SPARSE_MM "(Tensor values, Tensor indices, Tensor dense) -> Tensor"
#define BP_SCHEMA_CORE_BATCH_NORM_BACKWARD                                              \
  "(Tensor grad_out, Tensor x, Tensor weight, Tensor mean, Tensor var, float eps, int " \
  "output_mask) "                                                                       \
  "-> (Tensor, Tensor, Tensor)"
/* (since 2.7) Optimiser updates of one parameter, fused. The outputs are
 * the parameter and its state, read and updated in place (they are not
 * fresh tensors), of grad's shape and dtype. The core has applied weight
 * decay: SGD's and Adam's to grad (and then passes maximize 0), AdamW's
 * decoupled one to param (maximize is passed as given).
 * core::sgd_step (momentum != 0): d = maximize ? -grad : grad;
 *   buf = first_step ? d : momentum * buf + (1 - dampening) * d;
 *   param -= lr * (nesterov ? d + momentum * buf : buf).
 * core::adam_step (no amsgrad): g = maximize ? -grad : grad;
 *   exp_avg = beta1 * exp_avg + (1 - beta1) * g;
 *   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g;
 *   param -= lr / (1 - beta1^step) * exp_avg /
 *            (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
 * (step counts from 1). A kernel declines what it does not handle (e.g.
 * strided operands) before it writes anything; the composite then runs. */
#define BP_SCHEMA_CORE_SGD_STEP                                                               \
  "(Tensor grad, float lr, float momentum, float dampening, int nesterov, int maximize, int " \
  "first_step) "                                                                              \
  "-> (Tensor, Tensor)"
#define BP_SCHEMA_CORE_ADAM_STEP                                                             \
  "(Tensor grad, float lr, float beta1, float beta2, float eps, int step, int maximize) -> " \
  "(Tensor, Tensor, Tensor)"
typedef struct bp_named_kernel_registration {
  size_t struct_size;
  const char* name;    /* "<namespace>::<op>", both [a-z0-9_]+ ("core::": see above) */
  const char* schema;  /* as above */
  uint32_t dtype_mask; /* BP_DTYPE_BIT()s of the first input it accepts */
  bp_kernel_fn fn;
  void* kernel_ctx;   /* passed back to fn (optional) */
  const char* origin; /* "file:line" of the registration (optional) */
} bp_named_kernel_registration;

/* Handed to the plugin by the core; the plugin calls it once per kernel. */
typedef struct bp_registrar {
  size_t struct_size;
  void* ctx; /* the core's; pass it back unchanged */
  /* Registers a kernel. A second registration of the same (op, dtype) is an
   * error whose message names both origins. */
  bp_status (*register_kernel)(void* ctx, const bp_kernel_registration* reg, bp_error* error);
  /* Registers a named op. A malformed name or schema, or a name this
   * plugin registered already, is an error. */
  bp_status (*register_named_kernel)(void* ctx, const bp_named_kernel_registration* reg,
                                     bp_error* error);
} bp_registrar;

/* ------------------------------------------------------------------------ */
/* Devices and memory                                                        */
/* ------------------------------------------------------------------------ */

typedef struct bp_device_props {
  size_t struct_size;
  char name[128];           /* human-readable, e.g. "x86_64 CPU (2 threads)" */
  uint64_t total_memory;    /* bytes; 0 when unknown */
  int32_t host_addressable; /* 1 when the host may read and write this memory directly */
  int32_t reserved;
} bp_device_props;

/* Allocator statistics. */
typedef struct bp_memory_stats {
  size_t struct_size;
  uint64_t allocated_bytes;   /* live bytes handed out */
  uint64_t reserved_bytes;    /* bytes held from the system, cached blocks included */
  uint64_t num_allocs;        /* allocate() calls so far */
  uint64_t num_system_allocs; /* of which went to the system allocator */
  /* (since 2.9) The allocator's cache of freed blocks: the part of
   * reserved_bytes held free for reuse, the most it may hold (0: no
   * bound, or no cache), and how many cached blocks it gave back to the
   * system so far (over its bound, under memory pressure, or on
   * empty_cache). */
  uint64_t cached_bytes;
  uint64_t cache_limit_bytes;
  uint64_t num_cache_releases;
} bp_memory_stats;

/* A tolerance a backend declares for one op and dtype, looser than the
 * conformance suite's default for that dtype. */
typedef struct bp_tolerance {
  int32_t op;    /* bp_op */
  int32_t dtype; /* bp_dtype */
  double rtol;   /* relative tolerance */
  double atol;   /* absolute tolerance */
} bp_tolerance;

/* One option the user gave the plugin (`--backend-option KEY=VALUE`), as
 * text; both strings are the core's and live until the entry point returns
 * (since 2.1). */
typedef struct bp_option {
  const char* key;
  const char* value;
} bp_option;

/* One option a plugin takes: `backplane devices` lists them, and the core
 * refuses an option the plugin does not list, before any kernel runs. The
 * description is one line and names the default (since 2.1). */
typedef struct bp_option_info {
  const char* key;
  const char* description;
} bp_option_info;

/* What the core tells the plugin about itself. */
typedef struct bp_host {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* core_version;
  /* The options given for this plugin (since 2.1; check BP_HAS_FIELD):
   * `options` may be NULL when `num_options` is 0. Each key appears once.
   * The entry point fails with BP_STATUS_INVALID_ARGUMENT and a message
   * naming the option for a value it cannot use. */
  const bp_option* options;
  int32_t num_options;
  int32_t reserved;
} bp_host;

/*
 * Memory
 *   Device memory is whatever handle `allocate` returns: a pointer, a
 *   cl_mem, a Vulkan buffer, an index into a remote table. The core never
 *   dereferences it and never does arithmetic on it: it hands the same
 *   handle back in bp_tensor.data (the element offset in byte_offset) and
 *   in the copies below (with a byte offset of their own). A device whose
 *   memory the host can read and write says so (props.host_addressable) and
 *   implements host_pointer, which the core uses for zero-copy host access.
 *
 * Asynchrony
 *   Every kernel, copy and memset is enqueued on a stream of one device
 *   and runs in the order of that stream; work on different streams is
 *   unordered unless an event orders it (event_record on one stream,
 *   stream_wait_event on another). A plugin whose work completes before
 *   each call returns (a CPU library) satisfies all of this trivially.
 *   The core waits only where the host needs data: after copy_to_host, for
 *   item(), printing and copies to host memory, and when the user asks.
 *
 *   A failure found by work already enqueued (an index out of range seen by
 *   a kernel, an integer power with a negative exponent) is kept by the
 *   plugin and returned as BP_STATUS_DEVICE_ERROR, with a message that
 *   names the op ("[gather] index 7 is out of range for dimension 0 of size
 *   3"), by the first of: stream_synchronize of that stream, event_query /
 *   event_synchronize of an event recorded on it after the failing work,
 *   synchronize of the device. It is reported once, then cleared. Later work
 *   on the stream still runs. No plugin waits for the device just to
 *   validate an argument.
 *
 * Threading
 *   Every entry point except destroy may be called from any thread and
 *   concurrently with any other, on the same or different streams; work
 *   enqueued concurrently on one stream is ordered as the calls were.
 */
typedef struct bp_plugin {
  size_t struct_size;
  uint32_t abi_major;     /* BP_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;     /* BP_ABI_MINOR the plugin was built with */
  const char* name;       /* backend name users type after --backend, [a-z0-9_] */
  const char* version;    /* the plugin's own version, e.g. "0.1.0" */
  int32_t dl_device_type; /* DLPack device type of its memory (1 = CPU) */
  int32_t reserved;
  void* ctx;

  /* Number of usable devices. When 0, writes why to `reason` (e.g. the
   * driver's message) so `backplane devices` can show it. */
  int32_t (*device_count)(void* ctx, char* reason, size_t reason_capacity);
  /* Fills `props` (whose struct_size the core set) for one device. */
  bp_status (*device_props)(void* ctx, int32_t device, bp_device_props* props, bp_error* error);

  /* Registers every kernel through `registrar`. Called once, after the core
   * has accepted the plugin's version. */
  bp_status (*register_kernels)(void* ctx, const bp_registrar* registrar, bp_error* error);

  /* Allocates `nbytes` (> 0) on `device` for work on `stream`, aligned to
   * at least `alignment` (a power of two: 64 for buffers of 512 bytes or
   * more, 16 below), and writes its handle (not NULL) to *out. */
  bp_status (*allocate)(void* ctx, int32_t device, bp_stream stream, size_t nbytes,
                        size_t alignment, void** out, bp_error* error);
  /* Frees memory from allocate(); `nbytes` is the size that was asked for,
   * `stream` the one it was allocated for. Work enqueued on `stream` before
   * this call may still use it: the plugin may give it to later work on
   * `stream` at once, and to other streams only once that work is done. The
   * core calls this only after work of other streams that used the memory
   * (bp::Tensor::record_stream) has completed. */
  void (*deallocate)(void* ctx, int32_t device, bp_stream stream, void* mem, size_t nbytes);

  /* Byte copies, enqueued on `stream`. `mem` + offset is device memory (a
   * handle from allocate and a byte offset into it), `host` host memory.
   * copy_from_host has read all of `host` when it returns (the core reuses
   * its buffers), unless `host` is from host_alloc (below); copy_to_host
   * has written `host` once the stream has
   * reached the copy (the core synchronises before reading it). A copy
   * between two devices of this plugin is one copy_on_device, enqueued on
   * `stream` of `dst_device` (the core orders the source's stream before
   * it); between plugins the core copies through host memory a chunk at a
   * time: two 2 MiB page-locked buffers of the destination (host_alloc,
   * below) when it has them, else one buffer of at most 4 MiB. */
  bp_status (*copy_from_host)(void* ctx, int32_t device, bp_stream stream, void* mem,
                              uint64_t offset, const void* host, size_t nbytes, bp_error* error);
  bp_status (*copy_to_host)(void* ctx, int32_t device, bp_stream stream, void* host,
                            const void* mem, uint64_t offset, size_t nbytes, bp_error* error);
  bp_status (*copy_on_device)(void* ctx, bp_stream stream, int32_t dst_device, void* dst,
                              uint64_t dst_offset, int32_t src_device, const void* src,
                              uint64_t src_offset, size_t nbytes, bp_error* error);
  /* Sets `nbytes` bytes at `mem` + `offset` to `value`, enqueued on `stream`. */
  bp_status (*memset)(void* ctx, int32_t device, bp_stream stream, void* mem, uint64_t offset,
                      int32_t value, size_t nbytes, bp_error* error);

  /* Streams. stream_create makes a new stream on `device` (never NULL);
   * stream_destroy is called once its work is done (the core synchronises
   * first). stream_synchronize waits for the stream's work and reports a
   * failure of it (DEVICE_ERROR). */
  bp_status (*stream_create)(void* ctx, int32_t device, bp_stream* out, bp_error* error);
  void (*stream_destroy)(void* ctx, int32_t device, bp_stream stream);
  bp_status (*stream_synchronize)(void* ctx, int32_t device, bp_stream stream, bp_error* error);

  /* Events. event_record marks the point `stream` has reached (recording
   * again moves the mark); stream_wait_event makes later work on `stream`
   * (of `device`) wait until `event`'s mark is reached, without blocking
   * the host; the event may be one of another device of this plugin;
   * event_query returns OK once the mark is reached, NOT_READY before (and
   * OK for an event never recorded); event_synchronize blocks until then.
   * Both report a failure of the stream's work before the mark. An event
   * may be destroyed while work still waits on it: the wait stands. */
  bp_status (*event_create)(void* ctx, int32_t device, bp_event* out, bp_error* error);
  void (*event_destroy)(void* ctx, int32_t device, bp_event event);
  bp_status (*event_record)(void* ctx, int32_t device, bp_event event, bp_stream stream,
                            bp_error* error);
  bp_status (*stream_wait_event)(void* ctx, int32_t device, bp_stream stream, bp_event event,
                                 bp_error* error);
  bp_status (*event_query)(void* ctx, int32_t device, bp_event event, bp_error* error);
  bp_status (*event_synchronize)(void* ctx, int32_t device, bp_event event, bp_error* error);

  /* Waits until all work queued on every stream of `device` has finished;
   * reports a failure of any of it (DEVICE_ERROR). */
  bp_status (*synchronize)(void* ctx, int32_t device, bp_error* error);

  /* The host address of byte `offset` of `mem` (optional: only for devices
   * with props.host_addressable; NULL otherwise). Valid while the memory
   * is; reading or writing through it is ordered like host code, so the
   * core synchronises the streams that use the memory first. */
  bp_status (*host_pointer)(void* ctx, int32_t device, const void* mem, uint64_t offset, void** out,
                            bp_error* error);

  /* Page-locked host memory for the core's staging buffers (optional: both
   * NULL when the device has none). The core copies between plugins
   * through two such buffers, so that one chunk's copy_from_host can run
   * while the next chunk comes in. A copy_from_host whose `host` lies in a
   * buffer from host_alloc may read it after returning, until `stream`
   * reaches the copy: the core leaves the buffer alone until an event
   * recorded after the copy is reached. */
  bp_status (*host_alloc)(void* ctx, size_t nbytes, void** out, bp_error* error);
  void (*host_free)(void* ctx, void* host);

  /* Releases `ctx` and everything this instance holds (optional, may be
   * NULL); other instances of the library may still be alive (see
   * "Instances" above). Called after the last memory of the instance was
   * deallocated and its streams destroyed, or when the core refuses the
   * instance. */
  void (*destroy)(void* ctx);

  /* Allocator statistics for `device` (optional, may be NULL). */
  bp_status (*memory_stats)(void* ctx, int32_t device, bp_memory_stats* stats, bp_error* error);

  /* Looser comparison tolerances for named ops (optional): the conformance
   * report shows each one. `tolerances` may be NULL when `num_tolerances`
   * is 0. */
  const bp_tolerance* tolerances;
  int32_t num_tolerances;
  int32_t reserved2;

  /* The options this plugin takes (since 2.1; optional: NULL and 0 for
   * none). Static or owned by `ctx`. */
  const bp_option_info* options;
  int32_t num_options;
  int32_t reserved3;

  /* Whether `stream` has run everything enqueued on it so far: OK when it
   * has, NOT_READY while work remains; like event_query it reports a
   * failure of that work (DEVICE_ERROR), and it does not wait for work to
   * finish (since 2.1; optional). Without it the core records an event and
   * queries that, which on a device whose event record is itself
   * asynchronous can say NOT_READY for a stream already idle. */
  bp_status (*stream_query)(void* ctx, int32_t device, bp_stream stream, bp_error* error);

  /* The device's own time between the marks of two events of `device`, in
   * milliseconds (since 2.4; optional: NULL for a device without a clock
   * of its own, whose work runs before each call returns). OK with *ms set
   * once both marks are reached, NOT_READY before; `start` is recorded
   * before `end`, on the same stream or ordered before it. Events made by
   * event_create must be able to time: what `backplane perf` uses to time
   * asynchronous work without the host's clock. */
  bp_status (*event_elapsed)(void* ctx, int32_t device, bp_event start, bp_event end, double* ms,
                             bp_error* error);

  /* Gives every free block the allocator of `device` keeps for reuse back
   * to the system, as torch.cuda.empty_cache does; memory held by live
   * allocations stays (since 2.9; optional: NULL for an allocator without
   * a cache). The core calls it only when asked to (bp::empty_cache); a
   * plugin still gives its cache back by itself when memory runs short. */
  bp_status (*empty_cache)(void* ctx, int32_t device, bp_error* error);

  /* Memory this plugin did not allocate, used as a tensor's storage: what
   * importing a DLPack tensor needs (since 2.10; optional: both NULL for a
   * plugin that imports nothing, and the core then refuses such imports
   * naming the backend). `external` is memory of the plugin's own
   * dl_device_type on `device`, as DLPack's `data` gives it there (a host
   * address for kDLCPU, a device address for kDLCUDA, a cl_mem for
   * kDLOpenCL); the core uses its first `nbytes` bytes. import_memory
   * checks what it can (that the memory is of this device, large enough)
   * and writes to *out a handle that the core then uses wherever a handle
   * from allocate() goes (bp_tensor.data, copies, memset, host_pointer),
   * except deallocate: the core calls release_import instead, once the
   * work enqueued on every stream that used the memory has finished, and
   * gives the memory back to its owner after that. The handle may be
   * `external` itself. An imported address need only be aligned to its
   * element type, not to allocate()'s 16 or 64 bytes. */
  bp_status (*import_memory)(void* ctx, int32_t device, void* external, size_t nbytes, void** out,
                             bp_error* error);
  void (*release_import)(void* ctx, int32_t device, void* mem);
} bp_plugin;

/*
 * The one exported entry point. Fills *plugin with the plugin's table
 * (plugin-owned, static or heap). Returns BP_STATUS_OK, or an error status
 * with a message when the plugin cannot start.
 */
typedef bp_status (*bp_plugin_init_fn)(const bp_host* host, const bp_plugin** plugin,
                                       bp_error* error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* BACKPLANE_PLUGIN_H */
