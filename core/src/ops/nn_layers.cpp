// dropout (a mask from the process generator, so a seed gives the same
// mask on every backend), gelu (on erf, or tanh's approximation) and
// embedding (rows of a table by index).
#include <backplane/autograd.h>
#include <backplane/nn_ops.h>

#include "../autograd/graph.h"
#include "nn_util.h"

namespace bp {

namespace {

void check_dropout(const char* op, const Tensor& input, double p) {
  BP_CHECK(p >= 0 && p <= 1, "[", op, "] the probability has to be between 0 and 1, got ", p);
  BP_CHECK_TYPE(is_floating(input.dtype()), "[", op, "] needs a floating input, got ",
                detail::describe_tensor(input));
}

// 1/(1-p) where rand >= p's complement keeps the element, 0 elsewhere.
Tensor dropout_scale(const Tensor& input, double p) {
  const Tensor keep = lt(rand_like(input), 1 - p);
  return keep.to(input.dtype()) * (p == 1 ? 0.0 : 1 / (1 - p));
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training) {
  check_dropout("dropout", input, p);
  if (!training || p == 0) return input;
  return input * dropout_scale(input, p);
}

Tensor& dropout_(Tensor& input, double p, bool training) {
  check_dropout("dropout_", input, p);
  if (!training || p == 0) return input;
  return input.mul_(dropout_scale(input, p));
}

Tensor gelu(const Tensor& input, bool tanh_approximation) {
  BP_CHECK_TYPE(is_floating(input.dtype()), "[gelu] needs a floating input, got ",
                detail::describe_tensor(input));
  if (Tensor out =
          detail::run_override("core::gelu", {input}, {int64_t{tanh_approximation ? 1 : 0}});
      out.defined())
    return out;
  if (tanh_approximation) {
    const Tensor inner =
        (input + input * input * input * 0.044715) * 0.7978845608028654;  // sqrt(2/pi)
    return input * 0.5 * (tanh(inner) + 1);
  }
  return input * 0.5 * (erf(input * 0.7071067811865476) + 1);  // 1/sqrt(2)
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  BP_CHECK(weight.defined() && weight.dim() == 2,
           "[embedding] expects a 2-D weight (num_embeddings, embedding_dim), got ",
           weight.defined() ? detail::describe_tensor(weight) : std::string("an undefined tensor"));
  detail::check_same_device("embedding", weight, indices);
  BP_CHECK_TYPE(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32,
                "[embedding] expects int64 or int32 indices, got ",
                detail::describe_tensor(indices));
  const int64_t rows = weight.size(0);
  std::optional<int64_t> pad = padding_idx;
  if (pad) {
    BP_CHECK(*pad >= -rows && *pad < rows, "[embedding] padding_idx ", *pad, " must be within the ",
             rows, " rows of the weight");
    if (*pad < 0) *pad += rows;
  }
  // A contiguous copy, whatever the layout: the same kernels run for every layout.
  const Tensor flat = indices.to(DType::Int64).clone(MemoryFormat::Contiguous).view({-1});
  if (flat.numel() > 0) {
    const int64_t lo = flat.min().item<int64_t>(), hi = flat.max().item<int64_t>();
    BP_CHECK_INDEX(lo >= 0 && hi < rows, "[embedding] index ", lo < 0 ? lo : hi,
                   " is out of range for a weight of ", rows, " rows");
  }
  DimVector shape(indices.sizes());
  shape.push_back(weight.size(1));
  Tensor out = weight.index_select(0, flat).view(shape);
  if (pad && autograd::needs_grad({&weight})) {
    // The same values; the padding row's uses pass no gradient back.
    const Tensor is_pad = eq(indices, *pad).unsqueeze(-1);
    out = where(is_pad, out.detach(), out);
  }
  return out;
}

}  // namespace bp
