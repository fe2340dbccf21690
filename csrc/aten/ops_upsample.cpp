// Native upsampling: nearest and nearest-exact (1/2/3-d), linear (1-d), bilinear (2-d),
// trilinear (3-d) and bicubic (2-d), forward and backward. Scales and source indices
// follow the CPU's formulas (ATen's UpSample.h helpers compute the per-dim ratio here).
// Non-float dtypes and arguments the CPU rejects go to the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/native/UpSample.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact1d_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/upsample_bicubic2d_backward_ops.h>
#include <ATen/ops/upsample_bicubic2d_ops.h>
#include <ATen/ops/upsample_bilinear2d_backward_ops.h>
#include <ATen/ops/upsample_bilinear2d_ops.h>
#include <ATen/ops/upsample_linear1d_backward_ops.h>
#include <ATen/ops/upsample_linear1d_ops.h>
#include <ATen/ops/upsample_nearest1d_backward_ops.h>
#include <ATen/ops/upsample_nearest1d_ops.h>
#include <ATen/ops/upsample_nearest2d_backward_ops.h>
#include <ATen/ops/upsample_nearest2d_ops.h>
#include <ATen/ops/upsample_nearest3d_backward_ops.h>
#include <ATen/ops/upsample_nearest3d_ops.h>
#include <ATen/ops/upsample_trilinear3d_backward_ops.h>
#include <ATen/ops/upsample_trilinear3d_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_upsample.h"

namespace twgpu::aten {
namespace {

using at::IntArrayRef;
using at::Tensor;
using nn::Interp;
using OptD = std::optional<double>;

// Geometry for input sizes [N, C, *in] and output spatial sizes, or nullopt when the CPU
// would reject them (then the fallback raises its error).
std::optional<nn::UpsampleGeometry> geometry(IntArrayRef input_size, IntArrayRef output_size,
                                             int nd, Interp mode, bool align,
                                             std::array<OptD, 3> scales) {
  if (static_cast<int>(input_size.size()) != nd + 2 ||
      static_cast<int>(output_size.size()) != nd)
    return std::nullopt;
  nn::UpsampleGeometry g;
  g.nd = nd;
  g.mode = mode;
  g.align_corners = align;
  g.planes = u32(input_size[0] * input_size[1]);
  if (input_size[1] == 0) return std::nullopt;
  for (int j = 0; j < nd; ++j) {
    const int64_t in = input_size[2 + j], out = output_size[j];
    if (in <= 0 || out <= 0) return std::nullopt;
    const int jj = 3 - nd + j;
    g.in[jj] = u32(in);
    g.out[jj] = u32(out);
    g.scale[jj] = (mode == Interp::Nearest || mode == Interp::NearestExact)
                      ? at::native::compute_scales_value<float>(scales[j], in, out)
                      : at::native::area_pixel_compute_scale<float>(in, out, align, scales[j]);
  }
  return g;
}

std::vector<int64_t> out_shape(IntArrayRef input_size, IntArrayRef output_size) {
  std::vector<int64_t> s = {input_size[0], input_size[1]};
  s.insert(s.end(), output_size.begin(), output_size.end());
  return s;
}

// Forward: false when not native (caller falls back).
bool forward(const Tensor& self, IntArrayRef osz, int nd, Interp mode, bool align,
             std::array<OptD, 3> scales, Tensor& out) {
  if (!nn_float(self) || out.scalar_type() != self.scalar_type()) return false;
  auto g = geometry(self.sizes(), osz, nd, mode, align, scales);
  if (!g) return false;
  at::native::resize_output(out, out_shape(self.sizes(), osz));
  if (out.numel() == 0) return true;
  Tensor x = self.contiguous();
  const bool direct = out.is_contiguous() && !out.storage().is_alias_of(self.storage());
  Tensor y = direct ? out : at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
  TWGPU_TRY
  RuntimeLock lock;
  nn::upsample_forward(lock.ctx(), operand(x), *g, operand(y));
  TWGPU_CATCH
  if (!direct) out.copy_(y);
  return true;
}

bool backward(const Tensor& grad_out, IntArrayRef osz, IntArrayRef isz, int nd, Interp mode,
              bool align, std::array<OptD, 3> scales, Tensor& grad_input) {
  if (!nn_float(grad_out) || grad_input.scalar_type() != grad_out.scalar_type()) return false;
  auto g = geometry(isz, osz, nd, mode, align, scales);
  if (!g || grad_out.sizes() != IntArrayRef(out_shape(isz, osz))) return false;
  at::native::resize_output(grad_input, isz);
  if (grad_input.numel() == 0) return true;
  Tensor go = grad_out.contiguous();
  Tensor acc = at::zeros(isz, grad_out.options().dtype(at::kFloat));
  TWGPU_TRY
  RuntimeLock lock;
  nn::upsample_backward(lock.ctx(), operand(go), *g, operand(acc));
  TWGPU_CATCH
  grad_input.copy_(acc);
  return true;
}

// ---- nearest ----------------------------------------------------------------------------

#define TWGPU_NEAREST(NAME, OP, ND, MODE, SCALE_PARAMS, SCALE_ARGS, SCALES)                     \
  Tensor& NAME##_out(const Tensor& self, IntArrayRef osz, SCALE_PARAMS, Tensor& out) {           \
    if (!forward(self, osz, ND, MODE, false, SCALES, out))                                      \
      return call_cpu_fallback<at::_ops::OP##_out>(self, osz, SCALE_ARGS, out);                  \
    return out;                                                                                 \
  }                                                                                             \
  Tensor& NAME##_backward_out(const Tensor& go, IntArrayRef osz, IntArrayRef isz, SCALE_PARAMS, \
                              Tensor& gi) {                                                     \
    if (!backward(go, osz, isz, ND, MODE, false, SCALES, gi))                                   \
      return call_cpu_fallback<at::_ops::OP##_backward_grad_input>(go, osz, isz, SCALE_ARGS, gi); \
    return gi;                                                                                  \
  }

#define P1 OptD s0
#define A1 s0
#define S1 (std::array<OptD, 3>{s0, std::nullopt, std::nullopt})
#define P2 OptD s0, OptD s1
#define A2 s0, s1
#define S2 (std::array<OptD, 3>{s0, s1, std::nullopt})
#define P3 OptD s0, OptD s1, OptD s2
#define A3 s0, s1, s2
#define S3 (std::array<OptD, 3>{s0, s1, s2})

TWGPU_NEAREST(nearest1d, upsample_nearest1d, 1, Interp::Nearest, P1, A1, S1)
TWGPU_NEAREST(nearest2d, upsample_nearest2d, 2, Interp::Nearest, P2, A2, S2)
TWGPU_NEAREST(nearest3d, upsample_nearest3d, 3, Interp::Nearest, P3, A3, S3)
TWGPU_NEAREST(exact1d, _upsample_nearest_exact1d, 1, Interp::NearestExact, P1, A1, S1)
TWGPU_NEAREST(exact2d, _upsample_nearest_exact2d, 2, Interp::NearestExact, P2, A2, S2)
TWGPU_NEAREST(exact3d, _upsample_nearest_exact3d, 3, Interp::NearestExact, P3, A3, S3)

// ---- linear family and bicubic -------------------------------------------------------------

#define TWGPU_INTERP(NAME, OP, ND, MODE, SCALE_PARAMS, SCALE_ARGS, SCALES)                      \
  Tensor& NAME##_out(const Tensor& self, IntArrayRef osz, bool align, SCALE_PARAMS,             \
                     Tensor& out) {                                                             \
    if (!forward(self, osz, ND, MODE, align, SCALES, out))                                      \
      return call_cpu_fallback<at::_ops::OP##_out>(self, osz, align, SCALE_ARGS, out);           \
    return out;                                                                                 \
  }                                                                                             \
  Tensor& NAME##_backward_out(const Tensor& go, IntArrayRef osz, IntArrayRef isz, bool align,   \
                              SCALE_PARAMS, Tensor& gi) {                                       \
    if (!backward(go, osz, isz, ND, MODE, align, SCALES, gi))                                   \
      return call_cpu_fallback<at::_ops::OP##_backward_grad_input>(go, osz, isz, align,         \
                                                                   SCALE_ARGS, gi);             \
    return gi;                                                                                  \
  }

TWGPU_INTERP(linear1d, upsample_linear1d, 1, Interp::Linear, P1, A1, S1)
TWGPU_INTERP(bilinear2d, upsample_bilinear2d, 2, Interp::Linear, P2, A2, S2)
TWGPU_INTERP(trilinear3d, upsample_trilinear3d, 3, Interp::Linear, P3, A3, S3)
TWGPU_INTERP(bicubic2d, upsample_bicubic2d, 2, Interp::Cubic, P2, A2, S2)

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest1d.out", TORCH_FN(nearest1d_out));
  m.impl("upsample_nearest2d.out", TORCH_FN(nearest2d_out));
  m.impl("upsample_nearest3d.out", TORCH_FN(nearest3d_out));
  m.impl("_upsample_nearest_exact1d.out", TORCH_FN(exact1d_out));
  m.impl("_upsample_nearest_exact2d.out", TORCH_FN(exact2d_out));
  m.impl("_upsample_nearest_exact3d.out", TORCH_FN(exact3d_out));
  m.impl("upsample_nearest1d_backward.grad_input", TORCH_FN(nearest1d_backward_out));
  m.impl("upsample_nearest2d_backward.grad_input", TORCH_FN(nearest2d_backward_out));
  m.impl("upsample_nearest3d_backward.grad_input", TORCH_FN(nearest3d_backward_out));
  m.impl("_upsample_nearest_exact1d_backward.grad_input", TORCH_FN(exact1d_backward_out));
  m.impl("_upsample_nearest_exact2d_backward.grad_input", TORCH_FN(exact2d_backward_out));
  m.impl("_upsample_nearest_exact3d_backward.grad_input", TORCH_FN(exact3d_backward_out));
  m.impl("upsample_linear1d.out", TORCH_FN(linear1d_out));
  m.impl("upsample_bilinear2d.out", TORCH_FN(bilinear2d_out));
  m.impl("upsample_trilinear3d.out", TORCH_FN(trilinear3d_out));
  m.impl("upsample_bicubic2d.out", TORCH_FN(bicubic2d_out));
  m.impl("upsample_linear1d_backward.grad_input", TORCH_FN(linear1d_backward_out));
  m.impl("upsample_bilinear2d_backward.grad_input", TORCH_FN(bilinear2d_backward_out));
  m.impl("upsample_trilinear3d_backward.grad_input", TORCH_FN(trilinear3d_backward_out));
  m.impl("upsample_bicubic2d_backward.grad_input", TORCH_FN(bicubic2d_backward_out));
}

}  // namespace twgpu::aten
