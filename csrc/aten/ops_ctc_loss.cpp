// Native CTC loss: `_ctc_loss` and `_ctc_loss_backward` (both the int[] and the Tensor
// length overloads; `ctc_loss` itself is composite and reduces on the device) for float32
// log_probs [time, batch, classes] with int32 or int64 targets, padded [batch, S] or
// concatenated [sum of target lengths]. Lengths live on the host (the Tensor overloads
// copy them there, as the CPU kernel does); target values are range-checked on the device
// (runtime/device_checks.h). Other dtypes go to the CPU fallback.
// empty.h first: the *_ops.h headers alone miss declarations they use.
#include <ATen/ops/empty.h>
#include <ATen/ops/_ctc_loss_backward_ops.h>
#include <ATen/ops/_ctc_loss_ops.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/ctc_loss.h"
#include "kernels/nn_margin_loss.h"  // check_targets: the range check of int64 labels
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using at::IntArrayRef;

// The targets each sample uses, as int64 on the device (padding zeroed, so the range
// check sees only real labels), and the per-sample (input length, target length, first
// target) table the kernels read.
struct CtcInputs {
  nn::CtcGeometry g;
  Tensor targets;
  Tensor meta;
};

CtcInputs prepare(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                  IntArrayRef target_lengths, int64_t blank) {
  TORCH_CHECK(log_probs.dim() == 3, "ctc_loss: expected log_probs of [time, batch, classes], got ",
              log_probs.sizes());
  TORCH_CHECK(log_probs.numel() > 0, "log_probs tensor must not be empty");
  const int64_t time = log_probs.size(0), batch = log_probs.size(1), classes = log_probs.size(2);
  TORCH_CHECK(blank >= 0 && blank < classes, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == batch,
              "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == batch,
              "target_lengths must be of size batch_size");
  TORCH_CHECK(targets.scalar_type() == at::kLong || targets.scalar_type() == at::kInt,
              "ctc_loss: expected int32 or int64 targets, got ", targets.scalar_type());
  int64_t max_target = 0, total_targets = 0;
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(input_lengths[b] >= 0, "Expected input_lengths to have value at least 0, ",
                "but got value ", input_lengths[b]);
    TORCH_CHECK(input_lengths[b] <= time, "Expected input_lengths to have value at most ", time,
                ", but got value ", input_lengths[b]);
    TORCH_CHECK(target_lengths[b] >= 0, "Expected target_lengths to have value at least 0, ",
                "but got value ", target_lengths[b]);
    max_target = std::max(max_target, target_lengths[b]);
    total_targets += target_lengths[b];
  }
  const bool concatenated = targets.dim() == 1;
  if (concatenated) {
    TORCH_CHECK(targets.numel() >= total_targets, "ctc_loss: the target lengths add up to ",
                total_targets, " but targets has ", targets.numel(), " elements");
  } else {
    TORCH_CHECK(targets.dim() == 2 && targets.size(0) == batch,
                "ctc_loss: expected targets of [batch, S] or 1-d, got ", targets.sizes());
    TORCH_CHECK(targets.size(1) >= max_target, "Expected tensor to have size at least ", max_target,
                " at dimension 1, but got size ", targets.size(1), " for argument #2 'targets'");
  }
  const int64_t width = 2 * max_target + 1;
  TORCH_CHECK(time * batch * std::max(classes, width) <= INT32_MAX,
              "ctc_loss: too many elements for one kernel");

  CtcInputs in;
  in.g = {u32(time), u32(batch), u32(classes), u32(width), u32(blank)};
  const auto device = log_probs.device();
  const auto long_opts = at::TensorOptions().dtype(at::kLong);
  Tensor meta = at::empty({batch, 3}, at::TensorOptions().dtype(at::kInt));
  auto m = meta.accessor<int32_t, 2>();
  int64_t offset = 0;
  for (int64_t b = 0; b < batch; ++b) {
    m[b][0] = static_cast<int32_t>(input_lengths[b]);
    m[b][1] = static_cast<int32_t>(target_lengths[b]);
    m[b][2] = static_cast<int32_t>(concatenated ? offset : b * max_target);
    offset += target_lengths[b];
  }
  in.meta = meta.to(device);
  Tensor used;
  if (concatenated) {
    used = targets.narrow(0, 0, total_targets).to(device, at::kLong).contiguous();
  } else {
    Tensor t = targets.narrow(1, 0, max_target).to(device, at::kLong);
    Tensor padding = at::empty({batch, max_target}, at::TensorOptions().dtype(at::kBool));
    auto p = padding.accessor<bool, 2>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < max_target; ++j) p[b][j] = j >= target_lengths[b];
    used = t.masked_fill(padding.to(device), 0).contiguous();
  }
  // Kernels bind the targets even when there are none.
  in.targets = used.numel() > 0 ? used : at::zeros({1}, long_opts.device(device));
  return in;
}

void check_target_values(Context& ctx, const CtcInputs& in) {
  nn::check_targets(ctx, operand(in.targets), in.targets.numel(), 0, in.g.classes,
                    ctx.checks().code_for("target index out of range in aten::ctc_loss"));
}

bool native(const Tensor& log_probs) {
  return log_probs.scalar_type() == at::kFloat && log_probs.dim() == 3;
}

std::tuple<Tensor, Tensor> ctc_loss_forward(const Tensor& log_probs, const Tensor& targets,
                                            IntArrayRef input_lengths, IntArrayRef target_lengths,
                                            int64_t blank, bool zero_infinity) {
  if (!native(log_probs))
    return call_cpu_fallback<at::_ops::_ctc_loss>(log_probs, targets, input_lengths,
                                                  target_lengths, blank, zero_infinity);
  CtcInputs in = prepare(log_probs, targets, input_lengths, target_lengths, blank);
  const auto opts = log_probs.options();
  Tensor nll = at::empty({log_probs.size(1)}, opts);
  Tensor log_alpha = at::empty({log_probs.size(1), log_probs.size(0), int64_t(in.g.width)}, opts);
  Tensor lp = log_probs.contiguous();
  TWGPU_TRY
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  check_target_values(ctx, in);
  nn::ctc_loss_forward(ctx, operand(lp), operand(in.targets), operand(in.meta), in.g,
                       operand(log_alpha), operand(nll));
  TWGPU_CATCH
  return {nll, log_alpha};
}

Tensor ctc_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                         IntArrayRef input_lengths, IntArrayRef target_lengths,
                         const Tensor& neg_log_likelihood, const Tensor& log_alpha, int64_t blank,
                         bool zero_infinity) {
  const bool float_args = grad.scalar_type() == at::kFloat &&
                          neg_log_likelihood.scalar_type() == at::kFloat &&
                          log_alpha.scalar_type() == at::kFloat;
  if (!native(log_probs) || !float_args)
    return call_cpu_fallback<at::_ops::_ctc_loss_backward>(grad, log_probs, targets, input_lengths,
                                                           target_lengths, neg_log_likelihood,
                                                           log_alpha, blank, zero_infinity);
  CtcInputs in = prepare(log_probs, targets, input_lengths, target_lengths, blank);
  const int64_t batch = in.g.batch;
  TORCH_CHECK(grad.numel() == batch && neg_log_likelihood.numel() == batch,
              "ctc_loss_backward: expected grad and neg_log_likelihood of [", batch, "], got ",
              grad.sizes(), " and ", neg_log_likelihood.sizes());
  TORCH_CHECK(log_alpha.dim() == 3 && log_alpha.size(0) == batch &&
                  log_alpha.size(1) == log_probs.size(0) && log_alpha.size(2) >= in.g.width,
              "ctc_loss_backward: expected log_alpha of [", batch, ", ", log_probs.size(0), ", ",
              in.g.width, "], got ", log_alpha.sizes());
  Tensor result = at::empty(log_probs.sizes(), log_probs.options());
  // The kernels index log_alpha with the width these lengths give.
  Tensor la = log_alpha.narrow(2, 0, in.g.width).contiguous();
  Tensor log_beta = at::empty(la.sizes(), la.options());
  Tensor go = grad.reshape({batch}).contiguous();
  Tensor nll = neg_log_likelihood.reshape({batch}).contiguous();
  Tensor lp = log_probs.contiguous();
  TWGPU_TRY
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  check_target_values(ctx, in);
  nn::ctc_loss_backward(ctx, operand(go), operand(lp), operand(in.targets), operand(in.meta),
                        operand(nll), operand(la), in.g, zero_infinity, operand(log_beta),
                        operand(result));
  TWGPU_CATCH
  return result;
}

std::vector<int64_t> host_lengths(const Tensor& lengths) {
  Tensor l = lengths.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

std::tuple<Tensor, Tensor> ctc_loss_forward_tensor(const Tensor& log_probs, const Tensor& targets,
                                                   const Tensor& input_lengths,
                                                   const Tensor& target_lengths, int64_t blank,
                                                   bool zero_infinity) {
  return ctc_loss_forward(log_probs, targets, host_lengths(input_lengths),
                          host_lengths(target_lengths), blank, zero_infinity);
}

Tensor ctc_loss_backward_tensor(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                                const Tensor& input_lengths, const Tensor& target_lengths,
                                const Tensor& neg_log_likelihood, const Tensor& log_alpha,
                                int64_t blank, bool zero_infinity) {
  return ctc_loss_backward(grad, log_probs, targets, host_lengths(input_lengths),
                           host_lengths(target_lengths), neg_log_likelihood, log_alpha, blank,
                           zero_infinity);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", TORCH_FN(ctc_loss_forward));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_forward_tensor));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor));
}

}  // namespace twgpu::aten
