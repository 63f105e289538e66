// Shared declarations of the hostref kernels: the SDK's loops and argument
// checks they use, and the registration function of each op family.
//
// Every kernel here is a straightforward host loop: no threads, no SIMD, no
// library. That keeps the example readable and makes it a reference any
// backend can be compared with. The kernel files use nothing but the SDK
// headers, so another plugin (plugins/sim) can compile them with its own
// memory and entry point.
#pragma once

#include <array>
#include <backplane/sdk/checks.hpp>
#include <backplane/sdk/elementwise.hpp>
#include <backplane/sdk/loops.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/strided.hpp>
#include <backplane/sdk/tensor.hpp>
#include <cstdint>
#include <type_traits>

namespace hostref {

using bp::sdk::KernelCall;
using bp::sdk::Registrar;
using bp::sdk::TensorRef;

using bp::sdk::at;
using bp::sdk::kBaseDtypes;
using bp::sdk::kFloatDtypes;
using bp::sdk::kNumericDtypes;
using bp::sdk::map1;
using bp::sdk::map2;
using bp::sdk::TensorDesc;  // an operand seen with another shape
namespace check = bp::sdk::check;
namespace fn = bp::sdk::fn;  // the value of each element (elementwise.hpp)

// One function per op family, each in its own file.
void register_copy_kernels(Registrar& r);     // copy.cpp: FILL, COPY
void register_binary_kernels(Registrar& r);   // binary.cpp: ADD..DIV, MAXIMUM, MINIMUM, POW
void register_compare_kernels(Registrar& r);  // compare.cpp: EQ..GE, LOGICAL_AND/OR, WHERE
void register_unary_kernels(Registrar& r);    // unary.cpp: RELU, NEG..CLAMP, LOGICAL_NOT
void register_reduce_kernels(Registrar& r);   // reduce.cpp: SUM, PROD, MAX, MIN, ARGMAX, ARGMIN
void register_sort_kernels(Registrar& r);     // sort.cpp: ARGSORT, CUMSUM
void register_matmul_kernels(Registrar& r);   // matmul.cpp: MATMUL
void register_softmax_kernels(Registrar& r);  // softmax.cpp: SOFTMAX, LOG_SOFTMAX
void register_index_kernels(Registrar& r);    // index.cpp: GATHER, SCATTER, INDEX_SELECT
void register_random_kernels(Registrar& r);   // random.cpp: RANDOM
void register_named_kernels(Registrar& r);    // named.cpp: hostref::lerp, core::layer_norm
void register_nn_kernels(Registrar& r);     // nn.cpp: conv2d, pools, batch_norm (core:: overrides)
void register_optim_kernels(Registrar& r);  // optim.cpp: sgd_step, adam_step (core:: overrides)

// Every primitive op of plugin.h, and the named op.
inline void register_all_kernels(Registrar& r) {
  register_copy_kernels(r);
  register_binary_kernels(r);
  register_compare_kernels(r);
  register_unary_kernels(r);
  register_reduce_kernels(r);
  register_sort_kernels(r);
  register_matmul_kernels(r);
  register_softmax_kernels(r);
  register_index_kernels(r);
  register_random_kernels(r);
  register_named_kernels(r);
  register_nn_kernels(r);
  register_optim_kernels(r);
}

}  // namespace hostref
