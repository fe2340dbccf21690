// Native reflection and replication padding (1/2/3-d) and their backward kernels. Float
// dtypes run natively; other dtypes and paddings the CPU rejects go to the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/reflection_pad1d_backward_ops.h>
#include <ATen/ops/reflection_pad1d_ops.h>
#include <ATen/ops/reflection_pad2d_backward_ops.h>
#include <ATen/ops/reflection_pad2d_ops.h>
#include <ATen/ops/reflection_pad3d_backward_ops.h>
#include <ATen/ops/reflection_pad3d_ops.h>
#include <ATen/ops/replication_pad1d_backward_ops.h>
#include <ATen/ops/replication_pad1d_ops.h>
#include <ATen/ops/replication_pad2d_backward_ops.h>
#include <ATen/ops/replication_pad2d_ops.h>
#include <ATen/ops/replication_pad3d_backward_ops.h>
#include <ATen/ops/replication_pad3d_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/nn_pad.h"

namespace twgpu::aten {
namespace {

using at::IntArrayRef;
using at::Tensor;

// Input [N, C, *sp] or [C, *sp] (nd spatial dims, nonzero); padding (left, right) pairs
// from the last dim. nullopt when the CPU would reject the call.
std::optional<std::pair<nn::PadGeometry, std::vector<int64_t>>> geometry(const Tensor& x,
                                                                        IntArrayRef pad, int nd,
                                                                        bool reflect) {
  const int64_t dims = x.dim();
  if (!nn_float(x) || static_cast<int>(pad.size()) != 2 * nd ||
      (dims != nd + 1 && dims != nd + 2))
    return std::nullopt;
  for (int64_t d = 1; d < dims; ++d)
    if (x.size(d) == 0) return std::nullopt;
  nn::PadGeometry g;
  g.reflect = reflect;
  int64_t planes = 1;
  for (int64_t d = 0; d < dims - nd; ++d) planes *= x.size(d);
  g.planes = u32(planes);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - nd);
  for (int j = 0; j < nd; ++j) {
    const int64_t in = x.size(dims - nd + j);
    const int64_t before = pad[2 * (nd - 1 - j)], after = pad[2 * (nd - 1 - j) + 1];
    if (reflect && (before >= in || after >= in || before <= -in || after <= -in))
      return std::nullopt;
    const int64_t out = in + before + after;
    if (out < 1) return std::nullopt;
    const int jj = 3 - nd + j;
    g.in[jj] = u32(in);
    g.out[jj] = u32(out);
    g.before[jj] = static_cast<int32_t>(before);
    shape.push_back(out);
  }
  return std::make_pair(g, shape);
}

bool forward(const Tensor& self, IntArrayRef pad, int nd, bool reflect, Tensor& out) {
  auto gs = geometry(self, pad, nd, reflect);
  if (!gs || out.scalar_type() != self.scalar_type()) return false;
  at::native::resize_output(out, gs->second);
  if (out.numel() == 0) return true;
  Tensor x = self.contiguous();
  const bool direct = out.is_contiguous() && !out.storage().is_alias_of(self.storage());
  Tensor y = direct ? out : at::empty(out.sizes(), out.options().memory_format(at::MemoryFormat::Contiguous));
  TWGPU_TRY
  RuntimeLock lock;
  nn::pad_forward(lock.ctx(), operand(x), gs->first, operand(y));
  TWGPU_CATCH
  if (!direct) out.copy_(y);
  return true;
}

bool backward(const Tensor& grad_out, const Tensor& self, IntArrayRef pad, int nd, bool reflect,
              Tensor& grad_input) {
  auto gs = geometry(self, pad, nd, reflect);
  if (!gs || grad_out.scalar_type() != self.scalar_type() ||
      grad_out.sizes() != IntArrayRef(gs->second))
    return false;
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return true;
  Tensor go = grad_out.contiguous();
  Tensor acc = at::zeros(self.sizes(), self.options().dtype(at::kFloat));
  TWGPU_TRY
  RuntimeLock lock;
  nn::pad_backward(lock.ctx(), operand(go), gs->first, operand(acc));
  TWGPU_CATCH
  grad_input.copy_(acc);
  return true;
}

#define TWGPU_PAD(NAME, OP, ND, REFLECT)                                                       \
  Tensor& NAME##_out(const Tensor& self, IntArrayRef pad, Tensor& out) {                       \
    if (!forward(self, pad, ND, REFLECT, out))                                                 \
      return call_cpu_fallback<at::_ops::OP##_out>(self, pad, out);                            \
    return out;                                                                                \
  }                                                                                            \
  Tensor NAME(const Tensor& self, IntArrayRef pad) {                                           \
    Tensor out = at::empty({0}, self.options());                                               \
    if (!forward(self, pad, ND, REFLECT, out)) return call_cpu_fallback<at::_ops::OP>(self, pad); \
    return out;                                                                                \
  }                                                                                            \
  Tensor& NAME##_backward_out(const Tensor& go, const Tensor& self, IntArrayRef pad, Tensor& gi) { \
    if (!backward(go, self, pad, ND, REFLECT, gi))                                             \
      return call_cpu_fallback<at::_ops::OP##_backward_grad_input>(go, self, pad, gi);         \
    return gi;                                                                                 \
  }                                                                                            \
  Tensor NAME##_backward(const Tensor& go, const Tensor& self, IntArrayRef pad) {              \
    Tensor gi = at::empty({0}, self.options());                                                \
    if (!backward(go, self, pad, ND, REFLECT, gi))                                             \
      return call_cpu_fallback<at::_ops::OP##_backward>(go, self, pad);                        \
    return gi;                                                                                 \
  }

TWGPU_PAD(reflect1d, reflection_pad1d, 1, true)
TWGPU_PAD(reflect2d, reflection_pad2d, 2, true)
TWGPU_PAD(reflect3d, reflection_pad3d, 3, true)
TWGPU_PAD(replicate1d, replication_pad1d, 1, false)
TWGPU_PAD(replicate2d, replication_pad2d, 2, false)
TWGPU_PAD(replicate3d, replication_pad3d, 3, false)

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Structured ops: the out= kernel is enough; the others need each overload.
  m.impl("reflection_pad1d.out", TORCH_FN(reflect1d_out));
  m.impl("reflection_pad1d_backward.grad_input", TORCH_FN(reflect1d_backward_out));
  m.impl("reflection_pad2d", TORCH_FN(reflect2d));
  m.impl("reflection_pad2d.out", TORCH_FN(reflect2d_out));
  m.impl("reflection_pad2d_backward", TORCH_FN(reflect2d_backward));
  m.impl("reflection_pad2d_backward.grad_input", TORCH_FN(reflect2d_backward_out));
  m.impl("reflection_pad3d.out", TORCH_FN(reflect3d_out));
  m.impl("reflection_pad3d_backward.grad_input", TORCH_FN(reflect3d_backward_out));
  m.impl("replication_pad1d.out", TORCH_FN(replicate1d_out));
  m.impl("replication_pad1d_backward.grad_input", TORCH_FN(replicate1d_backward_out));
  m.impl("replication_pad2d.out", TORCH_FN(replicate2d_out));
  m.impl("replication_pad2d_backward", TORCH_FN(replicate2d_backward));
  m.impl("replication_pad2d_backward.grad_input", TORCH_FN(replicate2d_backward_out));
  m.impl("replication_pad3d.out", TORCH_FN(replicate3d_out));
  m.impl("replication_pad3d_backward", TORCH_FN(replicate3d_backward));
  m.impl("replication_pad3d_backward.grad_input", TORCH_FN(replicate3d_backward_out));
}

}  // namespace twgpu::aten
