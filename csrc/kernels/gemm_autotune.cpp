#include "kernels/gemm_autotune.h"

#include <chrono>
#include <limits>
#include <map>

#include "runtime/buffer_pool.h"
#include "runtime/config.h"
#include "runtime/error.h"
#include "runtime/graph_capture.h"
#include "runtime/runtime.h"

namespace twgpu {
namespace {

// Guarded by the runtime lock (gemm runs under it; the setters take it).
bool g_on = Config::get().gemm_autotune;
std::map<std::string, std::string> g_choices;

std::string operand_key(const MatOperand& o) {
  // Which dims are contiguous decides loads and kernels; the strides themselves do not.
  return std::string(dtype_name(o.dtype)) + (o.cols == 1 ? "r" : o.rows == 1 ? "c" : "s");
}

std::string shape_key(const GemmDesc& d) {
  return std::to_string(d.batch_outer) + "x" + std::to_string(d.batch_inner) + " " + std::to_string(d.m) + "x" +
         std::to_string(d.n) + "x" + std::to_string(d.k) + " a:" + operand_key(d.a) + " b:" + operand_key(d.b) +
         (d.c.buffer ? " c:" + operand_key(d.c) : std::string()) + " out:" + operand_key(d.out) +
         " compute:" + std::to_string(static_cast<int>(d.compute));
}

// Variants worth timing for this shape: tiles for products with enough outputs, GEMVs for
// few rows, the per-output kernels only where they cannot run for long.
std::vector<std::string> candidates(const GemmDesc& d) {
  const uint64_t outputs = d.batch_outer * d.batch_inner * d.m * d.n;
  std::vector<std::string> c = {""};
  if (d.n >= 16 && d.m >= 4) {
    c.insert(c.end(), {"tiled", "splitk", "block"});
    if (d.compute == Compute::F32) c.insert(c.end(), {"tiled_medium", "tiled_large"});
  }
  if (d.m <= 16 && d.compute == Compute::F32) {
    if (d.b.rows == 1 && d.b.cols != 1) c.push_back("gemv");
    if (d.b.cols == 1 && d.b.rows != 1) c.push_back("gemv_cols");
    c.push_back("gemv_walk");
  }
  if (outputs <= 65536) c.insert(c.end(), {"reduce", "per_out"});
  return c;
}

// Host time of `reps` products with `variant`, after one that builds its pipelines.
double trial_seconds(Context& ctx, const GemmDesc& d, const std::string& variant, int reps) {
  gemm_with_variant(ctx, d, variant);
  ctx.recorder().synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) gemm_with_variant(ctx, d, variant);
  ctx.recorder().synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

}  // namespace

bool set_gemm_autotune(bool on) {
  RuntimeLock lock;
  const bool before = g_on;
  g_on = on;
  return before;
}

bool gemm_autotune_enabled() { return g_on; }

std::string gemm_tuned_variant(Context& ctx, const GemmDesc& d) {
  const std::string key = shape_key(d);
  if (auto it = g_choices.find(key); it != g_choices.end()) return it->second;
  if (CapturedGraph::active() || d.conv) return "";
  // The trials write a scratch output of out's extent (out may alias C, or be read by
  // work recorded after this product).
  const MatOperand& o = d.out;
  const uint64_t last = (d.batch_outer - 1) * o.batch_outer + (d.batch_inner - 1) * o.batch_inner +
                        (d.m - 1) * o.rows + (d.n - 1) * o.cols;
  const uint64_t align = o.offset % 4;  // subword stores keep their word layout
  Allocation* scratch = ctx.pool().allocate((align + last + 1) * element_size(o.dtype) + 16);
  GemmDesc trial = d;
  trial.out.buffer = scratch->buffer;
  trial.out.offset = align;
  ctx.recorder().synchronize();  // earlier work stays out of the first trial's time
  std::string best;
  double best_s = std::numeric_limits<double>::infinity();
  for (const std::string& variant : candidates(d)) {
    try {
      // One timed product first; short ones are timed again over more to see past the
      // submit's round trip.
      double s = trial_seconds(ctx, trial, variant, 1);
      if (s < 2e-3) s = trial_seconds(ctx, trial, variant, static_cast<int>(std::min(20.0, 4e-3 / std::max(s, 1e-5))));
      if (s < best_s) best_s = s, best = variant;
    } catch (const Error&) {
      // A variant this adapter cannot build for the shape is no candidate.
    }
  }
  ctx.pool().release(scratch);
  g_choices[key] = best;
  return best;
}

std::vector<std::pair<std::string, std::string>> gemm_autotune_choices() {
  RuntimeLock lock;
  return {g_choices.begin(), g_choices.end()};
}

void clear_gemm_autotune() {
  RuntimeLock lock;
  g_choices.clear();
}

}  // namespace twgpu
