// The device ops behind torch.amp.GradScaler: _amp_foreach_non_finite_check_and_unscale_
// (unscale gradients in place, flag inf/NaN) and _amp_update_scale_ (grow or back off the
// loss scale). Kernels: kernels/grad_scaling. Checks and messages follow the CPU's, which
// match CUDA's; float64 gradients (stored, not computed, on this device) go to the CPU
// fallback like every float64 op.
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/webgpu_tensor.h"
#include "kernels/grad_scaling.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// `kind`: "a float" or "an int", as the CPU's messages say.
void check_scalar_arg(const Tensor& t, const char* name, c10::ScalarType dtype,
                      const char* kind) {
  TORCH_CHECK(t.device().type() == kDeviceType, name, " must be a webgpu tensor.");
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", kind, " tensor.");
}

ScalarSlot slot_of(const Tensor& t) {
  DeviceRef r = device_ref(t);
  return {r.buffer, r.offset};
}

bool same_storage(const Tensor& a, const Tensor& b) {
  return a.storage().is_alias_of(b.storage());
}

// The gradient as the kernel addresses it: TensorIterator drops size-1 dims and merges
// dims that step over each other, so most views arrive as one or two dims.
std::optional<StridedGrad> strided_grad(const Tensor& g) {
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .add_output(g)
                  .resize_outputs(false)
                  .build();
  if (iter.ndim() > kGradScalingMaxDims) return std::nullopt;
  DeviceRef r = device_ref(g);
  StridedGrad s;
  s.buffer = r.buffer;
  s.offset = r.offset;
  s.dtype = r.dtype;
  const int64_t elem = g.element_size();
  // The iterator orders dims fastest first; the kernel wants outermost first.
  for (int d = iter.ndim() - 1; d >= 0; --d) {
    s.sizes.push_back(static_cast<uint64_t>(iter.shape()[d]));
    s.strides.push_back(static_cast<uint64_t>(iter.strides(0)[d] / elem));
  }
  return s;
}

void unscale_one(Context& ctx, const Tensor& g, ScalarSlot inv_scale, ScalarSlot found_inf) {
  if (g.numel() == 0) return;
  if (auto s = strided_grad(g)) {
    unscale_grad(ctx, *s, inv_scale, found_inf);
    return;
  }
  // More dims than the kernel indexes even after merging: unscale a dense copy.
  Tensor dense = g.contiguous();
  unscale_grad(ctx, *strided_grad(dense), inv_scale, found_inf);
  const_cast<Tensor&>(g).copy_(dense);
}

void non_finite_check_and_unscale(at::TensorList grads, Tensor& found_inf,
                                  const Tensor& inv_scale) {
  check_scalar_arg(inv_scale, "inv_scale", c10::kFloat, "a float");
  check_scalar_arg(found_inf, "found_inf", c10::kFloat, "a float");
  bool any_double = false;
  for (const Tensor& g : grads) {
    TORCH_CHECK(g.device() == found_inf.device(),
                "_amp_foreach_non_finite_check_and_unscale_: all gradients must be on the "
                "device of found_inf (", found_inf.device(), "); one is on ", g.device(), ".");
    TORCH_CHECK(g.layout() == c10::kStrided,
                "_amp_foreach_non_finite_check_and_unscale_: sparse gradients must be "
                "coalesced to their values first (as GradScaler does)");
    const c10::ScalarType t = g.scalar_type();
    any_double = any_double || t == c10::kDouble;
    TORCH_CHECK_NOT_IMPLEMENTED(
        t == c10::kFloat || t == c10::kHalf || t == c10::kBFloat16 || t == c10::kDouble,
        "\"_amp_foreach_non_finite_check_and_unscale_webgpu\" not implemented for '",
        c10::toString(t), "'");
    TORCH_CHECK(!same_storage(g, found_inf),
                "_amp_foreach_non_finite_check_and_unscale_: found_inf shares memory with a "
                "gradient");
  }
  if (any_double) {
    call_cpu_fallback<at::_ops::_amp_foreach_non_finite_check_and_unscale_>(grads, found_inf,
                                                                            inv_scale);
    return;
  }
  // A storage binds once per dispatch: an inverse scale living in a gradient's or
  // found_inf's storage is read from its own copy.
  Tensor inv = inv_scale;
  bool shared = same_storage(inv, found_inf);
  for (const Tensor& g : grads) shared = shared || same_storage(inv, g);
  if (shared) inv = inv_scale.clone();

  TWGPU_TRY
  RuntimeLock lock;
  const ScalarSlot inv_slot = slot_of(inv), found_slot = slot_of(found_inf);
  for (const Tensor& g : grads) unscale_one(lock.ctx(), g, inv_slot, found_slot);
  TWGPU_CATCH
}

Tensor& update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf,
                     double growth_factor, double backoff_factor, int64_t growth_interval) {
  check_scalar_arg(scale, "current_scale", c10::kFloat, "a float");
  check_scalar_arg(growth_tracker, "growth_tracker", c10::kInt, "an int");
  check_scalar_arg(found_inf, "found_inf", c10::kFloat, "a float");
  TORCH_CHECK(!same_storage(scale, growth_tracker) && !same_storage(scale, found_inf) &&
                  !same_storage(growth_tracker, found_inf),
              "_amp_update_scale_: current_scale, growth_tracker and found_inf must not "
              "share memory");
  LossScaleUpdate u;
  u.scale = slot_of(scale);
  u.growth_tracker = slot_of(growth_tracker);
  u.found_inf = slot_of(found_inf);
  u.growth_factor = growth_factor;
  u.backoff_factor = backoff_factor;
  u.growth_interval = growth_interval;
  TWGPU_TRY
  RuntimeLock lock;
  update_loss_scale(lock.ctx(), u);
  TWGPU_CATCH
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(non_finite_check_and_unscale));
  m.impl("_amp_update_scale_", TORCH_FN(update_scale));
}

}  // namespace twgpu::aten
