// Connectionist temporal classification loss (`_ctc_loss` and its backward) in log space,
// f32. log_probs [time, batch, classes] contiguous; targets int64, already range-checked,
// with `meta` int32 [batch, 3] = (input length, target length, offset of the sample's
// first target). A sample's extended labels are its targets with a blank before, between
// and after them: `width` = 2 * max target length + 1 positions.
//
// The recurrences over time run one workgroup per sample, its invocations strided over the
// extended labels (any target length), one dispatch per chunk of time steps so no
// invocation loops past the adapter's loop limit (llvmpipe's; caps().max_loop_iterations).
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct CtcGeometry {
  uint32_t time = 0, batch = 0, classes = 0, width = 0, blank = 0;
};

// log_alpha [batch, time, width] (-inf past each sample's lengths) and nll [batch].
void ctc_loss_forward(Context& ctx, const Operand& log_probs, const Operand& targets,
                      const Operand& meta, const CtcGeometry& g, const Operand& log_alpha,
                      const Operand& nll);
// grad [time, batch, classes] = d nll / d log_probs times grad_nll [batch] (contiguous):
// zero past a sample's input length and, with zero_infinity, for samples of infinite loss.
// log_beta is scratch of log_alpha's shape.
void ctc_loss_backward(Context& ctx, const Operand& grad_nll, const Operand& log_probs,
                       const Operand& targets, const Operand& meta, const Operand& nll,
                       const Operand& log_alpha, const CtcGeometry& g, bool zero_infinity,
                       const Operand& log_beta, const Operand& grad);

}  // namespace twgpu::nn
