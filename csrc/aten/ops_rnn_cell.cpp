// Native fused recurrent cells: `_thnn_fused_lstm_cell` and `_thnn_fused_gru_cell` with
// their backward ops, the pointwise step the composite nn.LSTM/nn.GRU/LSTMCell/GRUCell
// call on non-CPU devices after the gate matmuls. float32, float16 and bfloat16 (computed
// in f32); inputs of any layout (made contiguous first). The CPU has no kernel for these
// ops, so other dtypes raise NotImplementedError instead of falling back.
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "aten/nn_common.h"
#include "kernels/rnn_cell.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

Tensor defined_or_none(const OptT& t) { return t.has_value() ? *t : Tensor(); }

// The checks CUDA's fused cells make: 2-d gate rows of `gates * hidden` columns, a state of
// [batch, hidden], biases of `gates * hidden` (both or neither), one dtype and device.
nn::CellGeometry check_cell(const char* op, int gates, const Tensor& input_gates,
                            const Tensor& hidden_gates, const Tensor& state,
                            const Tensor& input_bias, const Tensor& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2, op, ": expected input_gates to be 2-d, got ",
              input_gates.sizes());
  TORCH_CHECK(hidden_gates.sizes() == input_gates.sizes(), op,
              ": hidden_gates must match input_gates, got ", hidden_gates.sizes(), " and ",
              input_gates.sizes());
  TORCH_CHECK(input_gates.size(1) % gates == 0, op, ": the gates' width ", input_gates.size(1),
              " is not a multiple of ", gates);
  const int64_t batch = input_gates.size(0), hidden = input_gates.size(1) / gates;
  TORCH_CHECK(state.dim() == 2 && state.size(0) == batch && state.size(1) == hidden, op,
              ": expected a state of [", batch, ", ", hidden, "], got ", state.sizes());
  TORCH_CHECK(input_bias.defined() == hidden_bias.defined(), op,
              ": give both biases or neither");
  for (const Tensor& b : {input_bias, hidden_bias})
    TORCH_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == gates * hidden), op,
                ": expected biases of [", gates * hidden, "], got ", b.sizes());
  for (const Tensor& t : {hidden_gates, state, input_bias, hidden_bias}) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.device() == input_gates.device(), op, ": all tensors must be on ",
                input_gates.device(), ", got one on ", t.device());
    TORCH_CHECK(t.scalar_type() == input_gates.scalar_type(), op,
                ": all tensors must have one dtype, got ", input_gates.scalar_type(), " and ",
                t.scalar_type());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(nn_float(input_gates), op, ": torch_webgpu computes float32, ",
                              "float16 and bfloat16, got ", input_gates.scalar_type());
  TORCH_CHECK(batch <= INT32_MAX && input_gates.numel() <= INT32_MAX, op,
              ": too many elements for one kernel");
  return {u32(batch), u32(hidden)};
}

Tensor contig(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// A forward cell's inputs, checked and made contiguous (the kernels index them flat).
struct CellInputs {
  nn::CellGeometry g;
  Tensor input_gates, hidden_gates, state, input_bias, hidden_bias;
};

CellInputs cell_inputs(const char* op, int gates, const Tensor& input_gates,
                       const Tensor& hidden_gates, const Tensor& state, const OptT& input_bias,
                       const OptT& hidden_bias) {
  Tensor bi = defined_or_none(input_bias), bh = defined_or_none(hidden_bias);
  auto g = check_cell(op, gates, input_gates, hidden_gates, state, bi, bh);
  return {g, input_gates.contiguous(), hidden_gates.contiguous(), state.contiguous(), contig(bi),
          contig(bh)};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                             const Tensor& cx, const OptT& input_bias,
                                             const OptT& hidden_bias) {
  CellInputs in = cell_inputs("_thnn_fused_lstm_cell", 4, input_gates, hidden_gates, cx,
                              input_bias, hidden_bias);
  Tensor hy = at::empty(cx.sizes(), cx.options()), cy = at::empty(cx.sizes(), cx.options());
  Tensor workspace = at::empty(input_gates.sizes(), input_gates.options());
  TWGPU_TRY
  RuntimeLock lock;
  nn::lstm_cell_forward(lock.ctx(), operand(in.input_gates), operand(in.hidden_gates),
                        operand(in.state), operand(in.input_bias), operand(in.hidden_bias), in.g,
                        operand(hy), operand(cy), operand(workspace));
  TWGPU_CATCH
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const OptT& grad_hy, const OptT& grad_cy,
                                                      const Tensor& cx, const Tensor& cy,
                                                      const Tensor& workspace, bool has_bias) {
  Tensor ghy = defined_or_none(grad_hy), gcy = defined_or_none(grad_cy);
  // Neither output got a gradient: neither does anything here (CUDA's answer).
  if (!ghy.defined() && !gcy.defined()) return {};
  const char* op = "_thnn_fused_lstm_cell_backward_impl";
  auto g = check_cell(op, 4, workspace, workspace, cx, Tensor(), Tensor());
  for (const Tensor& t : {ghy, gcy, cy}) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.sizes() == cx.sizes(), op, ": expected [", cx.sizes(), "], got ", t.sizes());
    TORCH_CHECK(t.device() == cx.device() && t.scalar_type() == cx.scalar_type(), op,
                ": all tensors must have one dtype and device");
  }
  Tensor grad_gates = at::empty(workspace.sizes(), workspace.options());
  Tensor grad_cx = at::empty(cx.sizes(), cx.options());
  ghy = contig(ghy);
  gcy = contig(gcy);
  Tensor c = cx.contiguous(), cyc = cy.contiguous(), ws = workspace.contiguous();
  TWGPU_TRY
  RuntimeLock lock;
  nn::lstm_cell_backward(lock.ctx(), operand(ghy), operand(gcy), operand(c), operand(cyc),
                         operand(ws), g, operand(grad_gates), operand(grad_cx));
  TWGPU_CATCH
  Tensor grad_bias = has_bias ? at::sum(grad_gates, 0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                    const Tensor& hx, const OptT& input_bias,
                                    const OptT& hidden_bias) {
  CellInputs in = cell_inputs("_thnn_fused_gru_cell", 3, input_gates, hidden_gates, hx,
                              input_bias, hidden_bias);
  Tensor hy = at::empty(hx.sizes(), hx.options());
  Tensor workspace = at::empty({hx.size(0), 5 * hx.size(1)}, hx.options());
  TWGPU_TRY
  RuntimeLock lock;
  nn::gru_cell_forward(lock.ctx(), operand(in.input_gates), operand(in.hidden_gates),
                       operand(in.state), operand(in.input_bias), operand(in.hidden_bias), in.g,
                       operand(hy), operand(workspace));
  TWGPU_CATCH
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy,
                                                                     const Tensor& workspace,
                                                                     bool has_bias) {
  const char* op = "_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == 5 * grad_hy.size(1),
              op, ": expected grad_hy [batch, hidden] and workspace [batch, 5 * hidden], got ",
              grad_hy.sizes(), " and ", workspace.sizes());
  TORCH_CHECK(grad_hy.device() == workspace.device() &&
                  grad_hy.scalar_type() == workspace.scalar_type(),
              op, ": grad_hy and workspace must have one dtype and device");
  TORCH_CHECK_NOT_IMPLEMENTED(nn_float(grad_hy), op, ": torch_webgpu computes float32, ",
                              "float16 and bfloat16, got ", grad_hy.scalar_type());
  TORCH_CHECK(workspace.numel() <= INT32_MAX, op, ": too many elements for one kernel");
  const nn::CellGeometry g{u32(grad_hy.size(0)), u32(grad_hy.size(1))};
  const std::vector<int64_t> gates_shape{grad_hy.size(0), 3 * grad_hy.size(1)};
  Tensor grad_input_gates = at::empty(gates_shape, grad_hy.options());
  Tensor grad_hidden_gates = at::empty(gates_shape, grad_hy.options());
  Tensor grad_hx = at::empty(grad_hy.sizes(), grad_hy.options());
  Tensor go = grad_hy.contiguous(), ws = workspace.contiguous();
  TWGPU_TRY
  RuntimeLock lock;
  nn::gru_cell_backward(lock.ctx(), operand(go), operand(ws), g, operand(grad_input_gates),
                        operand(grad_hidden_gates), operand(grad_hx));
  TWGPU_CATCH
  Tensor grad_input_bias = has_bias ? at::sum(grad_input_gates, 0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? at::sum(grad_hidden_gates, 0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));
}

}  // namespace twgpu::aten
