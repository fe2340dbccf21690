// Autocast (automatic mixed precision) for the webgpu device: under
// torch.autocast("webgpu", dtype=float16 | bfloat16) each op below casts its floating
// inputs by a policy before it reaches our kernels, with the same op choice as CUDA's
// autocast so that a model tuned on CUDA behaves alike here:
//   lower_precision_fp  matmul- and convolution-like ops run in the autocast dtype;
//   fp32                ops whose range or accuracy suffers in 16 bits run in float32;
//   fp32_set_opt_dtype  reductions and softmax get dtype=float32 unless the caller gave one;
//   fp32_append_dtype   norm is redispatched to its overload that takes a dtype;
//   promote             ops mixing several tensors run in the widest input dtype.
// Every other op passes through unchanged (the fallthrough at the end). The casting
// wrappers (and the weight cast cache) are ATen's, from ATen/autocast_mode.h.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace twgpu::aten {
namespace {

// As on CUDA: binary_cross_entropy of float16 probabilities loses the precision it needs
// near 0 and 1, so autocast refuses it rather than casting silently.
at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on the webgpu device (as on CUDA): their float16 inputs cannot hold "
              "probabilities near 0 and 1 accurately.\n"
              "Use torch.nn.functional.binary_cross_entropy_with_logits or "
              "torch.nn.BCEWithLogitsLoss instead (they fuse the sigmoid and are safe to "
              "autocast), or leave the loss outside the autocast region and cast its inputs "
              "to float32 yourself.");
}

}  // namespace

// Shorter names for the registrations below: (op) or (op, overload).
#define TWGPU_AUTOCAST(POLICY, ...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, POLICY)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matrix products: the bulk of a model's arithmetic, and where 16-bit storage halves
  // the bytes moved.
  TWGPU_AUTOCAST(lower_precision_fp, mm)
  TWGPU_AUTOCAST(lower_precision_fp, mv)
  TWGPU_AUTOCAST(lower_precision_fp, bmm)
  TWGPU_AUTOCAST(lower_precision_fp, matmul)
  TWGPU_AUTOCAST(lower_precision_fp, linear)
  TWGPU_AUTOCAST(lower_precision_fp, addmm)
  TWGPU_AUTOCAST(lower_precision_fp, addmv)
  TWGPU_AUTOCAST(lower_precision_fp, addr)
  TWGPU_AUTOCAST(lower_precision_fp, addbmm)
  TWGPU_AUTOCAST(lower_precision_fp, baddbmm)
  TWGPU_AUTOCAST(lower_precision_fp, einsum)
  TWGPU_AUTOCAST(lower_precision_fp, chain_matmul)
  TWGPU_AUTOCAST(lower_precision_fp, linalg_multi_dot)
  TWGPU_AUTOCAST(lower_precision_fp, linalg_vecdot)
  // Convolutions (every entry point that reaches a convolution kernel) and prelu.
  TWGPU_AUTOCAST(lower_precision_fp, conv1d)
  TWGPU_AUTOCAST(lower_precision_fp, conv2d)
  TWGPU_AUTOCAST(lower_precision_fp, conv3d)
  TWGPU_AUTOCAST(lower_precision_fp, conv_tbc)
  TWGPU_AUTOCAST(lower_precision_fp, conv_transpose1d)
  TWGPU_AUTOCAST(lower_precision_fp, conv_transpose2d, input)
  TWGPU_AUTOCAST(lower_precision_fp, conv_transpose3d, input)
  TWGPU_AUTOCAST(lower_precision_fp, convolution)
  TWGPU_AUTOCAST(lower_precision_fp, _convolution)
  TWGPU_AUTOCAST(lower_precision_fp, _convolution, deprecated)
  TWGPU_AUTOCAST(lower_precision_fp, prelu)
  // Recurrent cells and attention: matrix products inside.
  TWGPU_AUTOCAST(lower_precision_fp, lstm_cell)
  TWGPU_AUTOCAST(lower_precision_fp, gru_cell)
  TWGPU_AUTOCAST(lower_precision_fp, rnn_tanh_cell)
  TWGPU_AUTOCAST(lower_precision_fp, rnn_relu_cell)
  TWGPU_AUTOCAST(lower_precision_fp, _thnn_fused_lstm_cell)
  TWGPU_AUTOCAST(lower_precision_fp, _thnn_fused_gru_cell)
  TWGPU_AUTOCAST(lower_precision_fp, scaled_dot_product_attention)
  TWGPU_AUTOCAST(lower_precision_fp, _scaled_dot_product_flash_attention)

  // Pointwise functions whose result overflows or loses digits in 16 bits.
  TWGPU_AUTOCAST(fp32, exp)
  TWGPU_AUTOCAST(fp32, expm1)
  TWGPU_AUTOCAST(fp32, log)
  TWGPU_AUTOCAST(fp32, log1p)
  TWGPU_AUTOCAST(fp32, log2)
  TWGPU_AUTOCAST(fp32, log10)
  TWGPU_AUTOCAST(fp32, pow, Tensor_Scalar)
  TWGPU_AUTOCAST(fp32, pow, Tensor_Tensor)
  TWGPU_AUTOCAST(fp32, pow, Scalar)
  TWGPU_AUTOCAST(fp32, reciprocal)
  TWGPU_AUTOCAST(fp32, rsqrt)
  TWGPU_AUTOCAST(fp32, sinh)
  TWGPU_AUTOCAST(fp32, cosh)
  TWGPU_AUTOCAST(fp32, tan)
  TWGPU_AUTOCAST(fp32, asin)
  TWGPU_AUTOCAST(fp32, acos)
  TWGPU_AUTOCAST(fp32, erfinv)
  TWGPU_AUTOCAST(fp32, softplus)
  // Normalizations: their statistics need float32.
  TWGPU_AUTOCAST(fp32, layer_norm)
  TWGPU_AUTOCAST(fp32, native_layer_norm)
  TWGPU_AUTOCAST(fp32, group_norm)
  TWGPU_AUTOCAST(fp32, rms_norm)
  TWGPU_AUTOCAST(fp32, frobenius_norm, dim)
  TWGPU_AUTOCAST(fp32, nuclear_norm)
  TWGPU_AUTOCAST(fp32, nuclear_norm, dim)
  TWGPU_AUTOCAST(fp32, renorm)
  // Losses: sums of many small terms.
  TWGPU_AUTOCAST(fp32, nll_loss)
  TWGPU_AUTOCAST(fp32, nll_loss2d)
  TWGPU_AUTOCAST(fp32, mse_loss)
  TWGPU_AUTOCAST(fp32, l1_loss)
  TWGPU_AUTOCAST(fp32, smooth_l1_loss)
  TWGPU_AUTOCAST(fp32, huber_loss)
  TWGPU_AUTOCAST(fp32, kl_div)
  TWGPU_AUTOCAST(fp32, poisson_nll_loss)
  TWGPU_AUTOCAST(fp32, binary_cross_entropy_with_logits)
  TWGPU_AUTOCAST(fp32, soft_margin_loss)
  TWGPU_AUTOCAST(fp32, margin_ranking_loss)
  TWGPU_AUTOCAST(fp32, hinge_embedding_loss)
  TWGPU_AUTOCAST(fp32, cosine_embedding_loss)
  TWGPU_AUTOCAST(fp32, triplet_margin_loss)
  TWGPU_AUTOCAST(fp32, multi_margin_loss)
  TWGPU_AUTOCAST(fp32, multilabel_margin_loss)
  // Distances and similarities: differences of nearly equal numbers.
  TWGPU_AUTOCAST(fp32, cosine_similarity)
  TWGPU_AUTOCAST(fp32, dist)
  TWGPU_AUTOCAST(fp32, pdist)
  TWGPU_AUTOCAST(fp32, cdist)
  TWGPU_AUTOCAST(fp32, logsumexp)
  // Resampling: CUDA keeps these in float32 too, so results match it.
  TWGPU_AUTOCAST(fp32, upsample_nearest1d)
  TWGPU_AUTOCAST(fp32, upsample_nearest2d)
  TWGPU_AUTOCAST(fp32, upsample_nearest3d)
  TWGPU_AUTOCAST(fp32, _upsample_nearest_exact1d)
  TWGPU_AUTOCAST(fp32, _upsample_nearest_exact2d)
  TWGPU_AUTOCAST(fp32, _upsample_nearest_exact3d)
  TWGPU_AUTOCAST(fp32, upsample_linear1d)
  TWGPU_AUTOCAST(fp32, upsample_bilinear2d)
  TWGPU_AUTOCAST(fp32, _upsample_bilinear2d_aa)
  TWGPU_AUTOCAST(fp32, upsample_trilinear3d)
  TWGPU_AUTOCAST(fp32, upsample_bicubic2d)
  TWGPU_AUTOCAST(fp32, _upsample_bicubic2d_aa)

  // Reductions and softmax: accumulate in float32 unless the caller chose a dtype.
  TWGPU_AUTOCAST(fp32_set_opt_dtype, softmax, int)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, log_softmax, int)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, sum)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, sum, dim_IntList)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, prod)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, prod, dim_int)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, cumsum)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, cumprod)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, linalg_vector_norm)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, linalg_matrix_norm)
  TWGPU_AUTOCAST(fp32_set_opt_dtype, linalg_matrix_norm, str_ord)

  // norm without a dtype argument: redispatched to the overload that takes one.
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(
      at::norm, "norm.Scalar", at::Tensor(const at::Tensor&, const at::Scalar&),
      at::Tensor(const at::Tensor&, const std::optional<at::Scalar>&, at::ScalarType),
      fp32_append_dtype)
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(
      at::norm, "norm.ScalarOpt_dim",
      at::Tensor(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool),
      at::Tensor(const at::Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool,
                 at::ScalarType),
      fp32_append_dtype)

  // Ops combining several tensors: the widest floating input wins.
  TWGPU_AUTOCAST(promote, addcmul)
  TWGPU_AUTOCAST(promote, addcdiv)
  TWGPU_AUTOCAST(promote, atan2)
  TWGPU_AUTOCAST(promote, bilinear)
  TWGPU_AUTOCAST(promote, cross)
  TWGPU_AUTOCAST(promote, dot)
  TWGPU_AUTOCAST(promote, vdot)
  TWGPU_AUTOCAST(promote, tensordot)
  TWGPU_AUTOCAST(promote, grid_sampler)
  TWGPU_AUTOCAST(promote, index_put)
  TWGPU_AUTOCAST(promote, scatter_add)
  // cat and stack are absent on purpose, as on CUDA: they promote by themselves.

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_refused));
}

#undef TWGPU_AUTOCAST

// Ops not listed above run as they are.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace twgpu::aten
