#include "kernels/ctc_loss.h"

#include <algorithm>

#include "runtime/runtime.h"

namespace twgpu::nn {

namespace {

// The sizes and the blank class, shared by the kernels.
void set_params(NnKernel& k, const CtcGeometry& g) {
  k.param("time", g.time).param("batch", g.batch).param("classes", g.classes);
  k.param("width", g.width).param("blank", g.blank);
}

// Shared WGSL: in0 log_probs, in1 targets, in2 the per-sample table (`sample_info`).
const char* kCtcCommon =
    "fn neg_inf() -> f32 { return -f32_inf(); }\n"
    "fn sample_info(b: u32, k: u32) -> u32 { return u32(in2(b * 3u + k)); }\n"
    // Label of extended position s: blank at even s. A target out of range (reported by
    // the range check) reads as class 0 so nothing outside log_probs is read.
    "fn prime(b: u32, s: u32) -> u32 {\n"
    "  if ((s & 1u) == 0u) { return u.blank; }\n"
    "  let c = in1(sample_info(b, 2u) + s / 2u);\n"
    "  return select(0u, u32(c), c >= 0 && u32(c) < u.classes);\n}\n"
    "fn lp(t: u32, b: u32, c: u32) -> f32 { return in0((t * u.batch + b) * u.classes + c); }\n"
    // log(exp(a) + exp(b) + exp(c)), shifted by the largest as the CPU does.
    "fn lse3(a: f32, b: f32, c: f32) -> f32 {\n"
    "  let m = max(a, max(b, c));\n"
    "  if (m == neg_inf()) { return neg_inf(); }\n"
    "  return log(exp(a - m) + exp(b - m) + exp(c - m)) + m;\n}\n";

// Forward (alpha) or backward (beta) recurrence over the chunk's time steps; out0 is the
// [batch, time, width] table, read back at the neighbouring time step.
std::string recurrence_body(bool forward) {
  std::string s = kCtcCommon;
  s += "fn run_group(b: u32, lid: u32) {\n"
       "  let il = sample_info(b, 0u);\n"
       "  let len = 2u * sample_info(b, 1u) + 1u;\n  let w = u.width;\n"
       "  let base = b * u.time * w;\n"
       "  for (var k = 0u; k < u.step_end - u.step_first; k = k + 1u) {\n";
  s += forward ? "    let t = u.step_first + k;\n" : "    let t = u.step_end - 1u - k;\n";
  s += "    for (var s = lid; s < w; s = s + " + std::to_string(kRowWorkgroup) + "u) {\n"
       "      var v = neg_inf();\n"
       "      if (t < il && s < len) {\n"
       "        let c = prime(b, s);\n";
  if (forward) {
    s += "        if (t == 0u) {\n"
         "          if (s < 2u) { v = lp(t, b, c); }\n"
         "        } else {\n"
         "          let row = base + (t - 1u) * w;\n"
         "          var a2 = neg_inf();\n          var a3 = neg_inf();\n"
         "          if (s >= 1u) { a2 = get0(row + s - 1u); }\n"
         "          if (s >= 2u && prime(b, s - 2u) != c) { a3 = get0(row + s - 2u); }\n"
         "          v = lse3(get0(row + s), a2, a3) + lp(t, b, c);\n"
         "        }\n";
  } else {
    s += "        if (t + 1u == il) {\n"
         "          if (s + 2u >= len) { v = lp(t, b, c); }\n"
         "        } else {\n"
         "          let row = base + (t + 1u) * w;\n"
         "          var a2 = neg_inf();\n          var a3 = neg_inf();\n"
         "          if (s + 1u < len) { a2 = get0(row + s + 1u); }\n"
         "          if (s + 2u < len && prime(b, s + 2u) != c) { a3 = get0(row + s + 2u); }\n"
         "          v = lse3(get0(row + s), a2, a3) + lp(t, b, c);\n"
         "        }\n";
  }
  s += "      }\n"
       "      out0(base + t * w + s, v);\n"
       "    }\n"
       // The next step reads this one's neighbours, written by other invocations.
       "    storageBarrier();\n    workgroupBarrier();\n"
       "  }\n}\n";
  return s;
}

// Runs the recurrence over all time steps, in chunks that keep every invocation's loop
// count (chunk steps times its share of the width) under the adapter's limit.
void run_recurrence(Context& ctx, bool forward, const Operand& log_probs, const Operand& targets,
                    const Operand& meta, const CtcGeometry& g, const Operand& table) {
  const uint64_t limit = ctx.caps().max_loop_iterations;
  const uint64_t per_step = 1 + (g.width + kRowWorkgroup - 1) / kRowWorkgroup;
  const uint32_t chunk =
      limit ? static_cast<uint32_t>(std::max<uint64_t>(1, limit / 2 / per_step)) : g.time;
  for (uint32_t done = 0; done < g.time; done += chunk) {
    const uint32_t steps = std::min(chunk, g.time - done);
    NnKernel k;
    k.key = forward ? "ctc_alpha" : "ctc_beta";
    k.inputs = {log_probs, targets, meta};
    k.outputs = {table};
    set_params(k, g);
    // The chunk's time steps [step_first, step_end): forward walks up from 0, backward
    // down from the last step.
    const uint32_t first = forward ? done : g.time - done - steps;
    k.param("step_first", first).param("step_end", first + steps);
    k.body = recurrence_body(forward);
    launch_groups(ctx, k, g.batch);
  }
}

}  // namespace

void ctc_loss_forward(Context& ctx, const Operand& log_probs, const Operand& targets,
                      const Operand& meta, const CtcGeometry& g, const Operand& log_alpha,
                      const Operand& nll) {
  run_recurrence(ctx, true, log_probs, targets, meta, g, log_alpha);
  NnKernel k;
  k.key = "ctc_nll";
  // in0 log_alpha, in1 unused, in2 meta (kCtcCommon's slots).
  k.inputs = {log_alpha, log_alpha, meta};
  k.outputs = {nll};
  set_params(k, g);
  k.body = std::string(kCtcCommon) +
           "fn run(b: u32) {\n"
           "  let il = sample_info(b, 0u);\n  let tl = sample_info(b, 1u);\n"
           // No input steps: only an empty target has an alignment.
           "  if (il == 0u) { out0(b, select(f32_inf(), 0.0, tl == 0u)); return; }\n"
           "  let row = (b * u.time + il - 1u) * u.width;\n"
           "  if (tl == 0u) { out0(b, -in0(row)); return; }\n"
           "  out0(b, -lse3(in0(row + 2u * tl), in0(row + 2u * tl - 1u), neg_inf()));\n}\n";
  launch_map(ctx, k, g.batch);
}

void ctc_loss_backward(Context& ctx, const Operand& grad_nll, const Operand& log_probs,
                       const Operand& targets, const Operand& meta, const Operand& nll,
                       const Operand& log_alpha, const CtcGeometry& g, bool zero_infinity,
                       const Operand& log_beta, const Operand& grad) {
  run_recurrence(ctx, false, log_probs, targets, meta, g, log_beta);
  // d nll / d log_probs[t, c] = exp(lp) - sum over extended positions s labelled c of
  // exp(alpha + beta - lp + nll) (the gradient through log_softmax, as the CPU gives it).
  // First every entry gets exp(lp) * grad; zero where the sample is over or its infinite
  // loss is zeroed; NaN for an infinite loss otherwise (as the CPU).
  {
    NnKernel k;
    k.key = "ctc_grad_init";
    // in3 nll, in4 grad_nll.
    k.inputs = {log_probs, log_probs, meta, nll, grad_nll};
    k.outputs = {grad};
    set_params(k, g);
    k.param("zero_infinity", zero_infinity ? 1u : 0u);
    k.body = std::string(kCtcCommon) +
             "fn run(e: u32) {\n"
             "  let tb = e / u.classes;\n"
             "  let b = tb % u.batch;\n  let t = tb / u.batch;\n"
             "  let nll = in3(b);\n"
             "  let over = t >= sample_info(b, 0u);\n"
             "  if (over || (u.zero_infinity == 1u && is_inf(nll))) { out0(e, 0.0); return; }\n"
             "  if (is_inf(nll)) { out0(e, f32_nan()); return; }\n"
             "  out0(e, exp(in0(e)) * in4(b));\n}\n";
    launch_map(ctx, k, uint64_t(g.time) * g.batch * g.classes);
  }
  // Then each extended position subtracts its share; positions of one label add atomically.
  NnKernel k;
  k.key = "ctc_grad_scatter";
  // in3 nll, in4 grad_nll, in5 log_alpha, in6 log_beta.
  k.inputs = {log_probs, targets, meta, nll, grad_nll, log_alpha, log_beta};
  k.outputs = {grad};
  set_params(k, g);
  k.accumulate = true;
  k.body = std::string(kCtcCommon) +
           "fn run(e: u32) {\n"
           "  let w = u.width;\n  let s = e % w;\n  let bt = e / w;\n"
           "  let t = bt % u.time;\n  let b = bt / u.time;\n"
           "  let nll = in3(b);\n"
           "  let len = 2u * sample_info(b, 1u) + 1u;\n"
           "  if (t >= sample_info(b, 0u) || s >= len || !is_finite(nll)) { return; }\n"
           "  let ab = in5(e) + in6(e);\n"
           "  if (ab == neg_inf()) { return; }\n"
           "  let c = prime(b, s);\n"
           "  let l = lp(t, b, c);\n"
           "  acc0((t * u.batch + b) * u.classes + c, -exp((ab + nll) - l) * in4(b));\n}\n";
  launch_map(ctx, k, uint64_t(g.batch) * g.time * g.width);
}

}  // namespace twgpu::nn
