#include "kernels/rnn_cell.h"

#include "runtime/runtime.h"

namespace twgpu::nn {

namespace {

// WGSL `gate(b, j, k)`: gate k of element (b, j), both gate rows each with its bias (when
// `bias`), grouped as the CPU's two biased matmuls are; in0/in1 are the gate rows,
// in2/in3 the biases. `gates` gates per row.
std::string gate_sum(bool bias, int gates) {
  const std::string width = std::to_string(gates) + "u * u.hidden";
  std::string s = "fn gate(b: u32, j: u32, k: u32) -> f32 {\n"
                  "  let c = k * u.hidden + j;\n"
                  "  let r = b * " + width + " + c;\n";
  s += bias ? "  return (in0(r) + in2(c)) + (in1(r) + in3(c));\n}\n"
            : "  return in0(r) + in1(r);\n}\n";
  return s;
}

void set_params(NnKernel& k, const CellGeometry& g) { k.param("hidden", g.hidden); }

}  // namespace

void lstm_cell_forward(Context& ctx, const Operand& input_gates, const Operand& hidden_gates,
                       const Operand& cx, const Operand& input_bias, const Operand& hidden_bias,
                       const CellGeometry& g, const Operand& hy, const Operand& cy,
                       const Operand& workspace) {
  const bool bias = input_bias.buffer != nullptr;
  NnKernel k;
  k.key = std::string("lstm_cell_fwd") + (bias ? "_bias" : "");
  k.inputs = {input_gates, hidden_gates, or_dummy(input_bias, input_gates),
              or_dummy(hidden_bias, input_gates), cx};
  k.outputs = {hy, cy, workspace};
  set_params(k, g);
  k.body = gate_sum(bias, 4) +
           "fn run(e: u32) {\n"
           "  let h = u.hidden;\n  let b = e / h;\n  let j = e % h;\n"
           "  let ig = sigmoid_f32(gate(b, j, 0u));\n"
           "  let fg = sigmoid_f32(gate(b, j, 1u));\n"
           "  let cg = tanh_f32(gate(b, j, 2u));\n"
           "  let og = sigmoid_f32(gate(b, j, 3u));\n"
           "  let c = fg * in4(e) + ig * cg;\n"
           "  out0(e, og * tanh_f32(c));\n  out1(e, c);\n"
           "  let w = b * 4u * h + j;\n"
           "  out2(w, ig);\n  out2(w + h, fg);\n"
           "  out2(w + 2u * h, cg);\n  out2(w + 3u * h, og);\n}\n";
  launch_map(ctx, k, uint64_t(g.batch) * g.hidden);
}

void lstm_cell_backward(Context& ctx, const Operand& grad_hy, const Operand& grad_cy,
                        const Operand& cx, const Operand& cy, const Operand& workspace,
                        const CellGeometry& g, const Operand& grad_gates, const Operand& grad_cx) {
  const bool has_hy = grad_hy.buffer != nullptr, has_cy = grad_cy.buffer != nullptr;
  NnKernel k;
  k.key = std::string("lstm_cell_bwd") + (has_hy ? "_ghy" : "") + (has_cy ? "_gcy" : "");
  k.inputs = {or_dummy(grad_hy, cx), or_dummy(grad_cy, cx), cx, cy, workspace};
  k.outputs = {grad_gates, grad_cx};
  set_params(k, g);
  k.body = std::string("fn run(e: u32) {\n"
                       "  let h = u.hidden;\n  let b = e / h;\n  let j = e % h;\n"
                       "  let w = b * 4u * h + j;\n"
                       "  let ig = in4(w);\n  let fg = in4(w + h);\n"
                       "  let cg = in4(w + 2u * h);\n  let og = in4(w + 3u * h);\n"
                       "  let tc = tanh_f32(in3(e));\n") +
           (has_hy ? "  let ghy = in0(e);\n" : "  let ghy = 0.0;\n") +
           (has_cy ? "  let gcy = in1(e);\n" : "  let gcy = 0.0;\n") +
           // The cell state's total gradient: directly and through hy = og * tanh(cy).
           "  let gc = gcy + ghy * og * (1.0 - tc * tc);\n"
           "  out0(w, gc * cg * ig * (1.0 - ig));\n"
           "  out0(w + h, gc * in2(e) * fg * (1.0 - fg));\n"
           "  out0(w + 2u * h, gc * ig * (1.0 - cg * cg));\n"
           "  out0(w + 3u * h, ghy * tc * og * (1.0 - og));\n"
           "  out1(e, gc * fg);\n}\n";
  launch_map(ctx, k, uint64_t(g.batch) * g.hidden);
}

void gru_cell_forward(Context& ctx, const Operand& input_gates, const Operand& hidden_gates,
                      const Operand& hx, const Operand& input_bias, const Operand& hidden_bias,
                      const CellGeometry& g, const Operand& hy, const Operand& workspace) {
  const bool bias = input_bias.buffer != nullptr;
  NnKernel k;
  k.key = std::string("gru_cell_fwd") + (bias ? "_bias" : "");
  k.inputs = {input_gates, hidden_gates, or_dummy(input_bias, input_gates),
              or_dummy(hidden_bias, input_gates), hx};
  k.outputs = {hy, workspace};
  set_params(k, g);
  // The new gate sees the reset gate times the hidden part (with its bias) only.
  k.body = gate_sum(bias, 3) +
           "fn part(b: u32, j: u32, k: u32, which: u32) -> f32 {\n"
           "  let c = k * u.hidden + j;\n  let r = b * 3u * u.hidden + c;\n" +
           (bias ? "  if (which == 0u) { return in0(r) + in2(c); }\n  return in1(r) + in3(c);\n}\n"
                 : "  if (which == 0u) { return in0(r); }\n  return in1(r);\n}\n") +
           "fn run(e: u32) {\n"
           "  let h = u.hidden;\n  let b = e / h;\n  let j = e % h;\n"
           "  let rg = sigmoid_f32(gate(b, j, 0u));\n"
           "  let zg = sigmoid_f32(gate(b, j, 1u));\n"
           "  let hn = part(b, j, 2u, 1u);\n"
           "  let ng = tanh_f32(part(b, j, 2u, 0u) + rg * hn);\n"
           "  let hx = in4(e);\n"
           "  out0(e, ng + zg * (hx - ng));\n"
           "  let w = b * 5u * h + j;\n"
           "  out1(w, rg);\n  out1(w + h, zg);\n  out1(w + 2u * h, ng);\n"
           "  out1(w + 3u * h, hn);\n  out1(w + 4u * h, hx);\n}\n";
  launch_map(ctx, k, uint64_t(g.batch) * g.hidden);
}

void gru_cell_backward(Context& ctx, const Operand& grad_hy, const Operand& workspace,
                       const CellGeometry& g, const Operand& grad_input_gates,
                       const Operand& grad_hidden_gates, const Operand& grad_hx) {
  NnKernel k;
  k.key = "gru_cell_bwd";
  k.inputs = {grad_hy, workspace};
  k.outputs = {grad_input_gates, grad_hidden_gates, grad_hx};
  set_params(k, g);
  k.body = "fn run(e: u32) {\n"
           "  let h = u.hidden;\n  let b = e / h;\n  let j = e % h;\n"
           "  let w = b * 5u * h + j;\n"
           "  let rg = in1(w);\n  let zg = in1(w + h);\n  let ng = in1(w + 2u * h);\n"
           "  let hn = in1(w + 3u * h);\n  let hx = in1(w + 4u * h);\n"
           "  let go = in0(e);\n"
           "  let gz = go * (hx - ng) * zg * (1.0 - zg);\n"
           "  let gn = go * (1.0 - zg) * (1.0 - ng * ng);\n"
           "  let gr = gn * hn * rg * (1.0 - rg);\n"
           "  let r = b * 3u * h + j;\n"
           "  out0(r, gr);\n  out0(r + h, gz);\n  out0(r + 2u * h, gn);\n"
           "  out1(r, gr);\n  out1(r + h, gz);\n  out1(r + 2u * h, gn * rg);\n"
           "  out2(e, go * zg);\n}\n";
  launch_map(ctx, k, uint64_t(g.batch) * g.hidden);
}

}  // namespace twgpu::nn
