// Fused recurrent cells (CUDA's `_thnn_fused_*_cell`): the pointwise part of one LSTM or
// GRU step after the two gate matmuls, forward and backward, over [batch, hidden] in f32
// (half types load and store through f32). Every operand is contiguous, gate rows
// [batch, k * hidden] in the gate order the CPU's composite uses (LSTM: input, forget,
// cell, output; GRU: reset, update, new). Biases are [k * hidden] or absent (null buffer).
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

struct CellGeometry {
  uint32_t batch = 0, hidden = 0;
};

// hy, cy = LSTM step; workspace [batch, 4 * hidden] keeps the activated gates for backward.
void lstm_cell_forward(Context& ctx, const Operand& input_gates, const Operand& hidden_gates,
                       const Operand& cx, const Operand& input_bias, const Operand& hidden_bias,
                       const CellGeometry& g, const Operand& hy, const Operand& cy,
                       const Operand& workspace);
// grad_gates [batch, 4 * hidden] and grad_cx from the gradients of hy and cy (either may be
// absent: zero).
void lstm_cell_backward(Context& ctx, const Operand& grad_hy, const Operand& grad_cy,
                        const Operand& cx, const Operand& cy, const Operand& workspace,
                        const CellGeometry& g, const Operand& grad_gates, const Operand& grad_cx);

// hy = GRU step; workspace [batch, 5 * hidden] = reset, update, new gates, the hidden
// gates' new part (with bias) and hx.
void gru_cell_forward(Context& ctx, const Operand& input_gates, const Operand& hidden_gates,
                      const Operand& hx, const Operand& input_bias, const Operand& hidden_bias,
                      const CellGeometry& g, const Operand& hy, const Operand& workspace);
// Gradients of the input gates and hidden gates ([batch, 3 * hidden] each) and of hx.
void gru_cell_backward(Context& ctx, const Operand& grad_hy, const Operand& workspace,
                       const CellGeometry& g, const Operand& grad_input_gates,
                       const Operand& grad_hidden_gates, const Operand& grad_hx);

}  // namespace twgpu::nn
