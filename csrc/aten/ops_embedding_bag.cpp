// Native embedding bags: _embedding_bag and _embedding_bag_forward_only (what
// F.embedding_bag and nn.EmbeddingBag call) for float32, float16 and bfloat16 weights
// with int32/int64 indices and offsets: modes sum (with per_sample_weights), mean and
// max, include_last_offset and padding_idx. The auxiliary outputs (offset2bag, bag_size,
// max_indices) have the CPU's shapes and values, so the backward (still the CPU's) reads
// them as it expects. Indices and offsets are checked on the device (error word, raised
// at the next synchronization); shapes and arguments the CPU rejects go to the CPU
// fallback, which raises its own errors.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_embedding_bag_forward_only_ops.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
#include "kernels/binding_window.h"
#include "kernels/embedding_bag.h"
#include "runtime/device_checks.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;
using Bags = std::tuple<Tensor, Tensor, Tensor, Tensor>;

bool index_type(const Tensor& t) {
  return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt;
}

std::optional<Bags> bag_forward(const Tensor& weight, const Tensor& indices_in,
                                const Tensor& offsets_in, int64_t mode, const OptT& psw_opt,
                                bool include_last_offset, int64_t padding_idx, bool forward_only) {
  Tensor psw = psw_opt.has_value() ? *psw_opt : Tensor();
  if (!nn_float(weight) || weight.dim() != 2 || indices_in.dim() != 1 || offsets_in.dim() != 1 ||
      !index_type(indices_in) || !index_type(offsets_in) || mode < 0 || mode > 2 ||
      indices_in.device() != weight.device() || offsets_in.device() != weight.device())
    return std::nullopt;
  if (psw.defined() && (mode != 0 || psw.scalar_type() != weight.scalar_type() ||
                        psw.sizes() != indices_in.sizes() || psw.device() != weight.device()))
    return std::nullopt;
  const int64_t n_off = offsets_in.size(0);
  if ((include_last_offset && n_off < 1) || (n_off == 0 && indices_in.numel() > 0)) return std::nullopt;
  if (weight.numel() == 0 || weight.numel() > INT32_MAX || indices_in.numel() > INT32_MAX || n_off > INT32_MAX)
    return std::nullopt;
  // Mixed index types compute in int64, as on the CPU.
  Tensor indices = indices_in, offsets = offsets_in;
  if (indices.scalar_type() != offsets.scalar_type()) {
    indices = indices.to(at::kLong);
    offsets = offsets.to(at::kLong);
  }
  indices = indices.contiguous();
  offsets = offsets.contiguous();
  const auto ix_opts = indices.options();
  const uint64_t budget = window_budget(Context::get());
  if (weight.nbytes() > budget && indices.numel() > 0 &&
      static_cast<uint64_t>(indices.numel() + 1) * weight.size(1) * weight.element_size() <= budget) {
    // A table larger than one storage binding: its rows the bags name, gathered (a windowed
    // index_select), form a small table that the bags then index in order. A padding index
    // becomes an appended row of that table, so it is still left out.
    const int64_t n = indices.numel();
    Tensor rows = at::cat({weight.index_select(0, indices), at::zeros({1, weight.size(1)}, weight.options())});
    Tensor order = at::arange(n, ix_opts);
    if (padding_idx >= 0) order = at::where(indices.eq(padding_idx), at::full({}, n, ix_opts), order);
    auto r = bag_forward(rows, order, offsets, mode, psw_opt, include_last_offset, padding_idx >= 0 ? n : -1,
                         forward_only);
    if (r && mode == 2) {  // max positions back to rows of the table
      Tensor& at_max = std::get<3>(*r);
      Tensor valid = at_max.ge(0).logical_and(at_max.lt(n));
      at_max = at::where(valid, indices.index_select(0, at_max.clamp(0, n - 1).flatten()).view(at_max.sizes()), at_max);
    }
    return r;
  }

  nn::BagGeometry g;
  g.num_weights = u32(weight.size(0));
  g.dim = u32(weight.size(1));
  g.indices = u32(indices.numel());
  g.offsets = u32(n_off);
  g.bags = u32(n_off - (include_last_offset ? 1 : 0));
  g.mode = static_cast<nn::BagMode>(mode);
  g.padding_idx = padding_idx;
  if (uint64_t(g.bags) * g.dim > INT32_MAX) return std::nullopt;

  // The CPU's fast path (sum and mean without a padding index) bounds bags by the offsets
  // and, for sum, leaves offset2bag empty; its bag sizes are zeros for sum.
  const bool fast = padding_idx < 0 && weight.stride(1) == 1 && (!psw.defined() || psw.stride(0) == 1);
  const bool fast_sum = fast && mode == 0;
  g.offsets_end = fast;
  Tensor output = at::empty({int64_t(g.bags), int64_t(g.dim)}, weight.options());
  Tensor offset2bag = at::empty({fast_sum ? 0 : int64_t(g.indices)}, ix_opts);
  Tensor bag_size = mode == 0 ? at::zeros({forward_only ? n_off : int64_t(g.bags)}, ix_opts)
                              : at::empty({int64_t(g.bags)}, ix_opts);
  Tensor max_indices = mode == 2 ? at::empty({int64_t(g.bags), int64_t(g.dim)}, ix_opts)
                                 : at::zeros(bag_size.sizes(), ix_opts);
  Tensor w = weight.contiguous();
  Tensor p = psw.defined() ? psw.contiguous() : psw;
  if (n_off == 0) return Bags(output, offset2bag, bag_size, max_indices);  // no bags, no entries
  // An empty index list has no buffer: its bindings borrow the offsets' (never read).
  nn::Operand ix_op = operand(offsets);
  if (indices.numel() > 0) ix_op = operand(indices);
  else ix_op.dtype = indices.scalar_type() == at::kLong ? DType::Int64 : DType::Int32;
  nn::Operand psw_op = p.defined() && p.numel() > 0 ? operand(p) : nn::Operand{};
  const bool any_bags = g.bags > 0;
  TWGPU_TRY
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  nn::embedding_bag_check(ctx, ix_op, operand(offsets), g,
                          ctx.checks().code_for("index out of range in aten::embedding_bag"),
                          ctx.checks().code_for("invalid offsets in aten::embedding_bag (offsets[0] must be 0, "
                                                "offsets must not decrease nor pass the input's length)"));
  if (output.numel() > 0) {
    // psw is absent when the list is empty (every bag is then empty too).
    nn::embedding_bag_forward(ctx, operand(w), ix_op, operand(offsets),
                              g.indices > 0 ? psw_op : nn::Operand{}, g, operand(output),
                              mode == 2 ? operand(max_indices) : nn::Operand{});
  }
  if (any_bags || g.indices > 0) {
    nn::embedding_bag_aux(ctx, ix_op, operand(offsets), g,
                          fast_sum || g.indices == 0 ? nn::Operand{} : operand(offset2bag),
                          mode == 0 || !any_bags ? nn::Operand{} : operand(bag_size));
  }
  TWGPU_CATCH
  return Bags(output, offset2bag, bag_size, max_indices);
}

Bags embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                   bool scale_grad_by_freq, int64_t mode, bool sparse, const OptT& psw,
                   bool include_last_offset, int64_t padding_idx) {
  if (auto r = bag_forward(weight, indices, offsets, mode, psw, include_last_offset, padding_idx, false))
    return *r;
  return call_cpu_fallback<at::_ops::_embedding_bag>(weight, indices, offsets, scale_grad_by_freq, mode,
                                                     sparse, psw, include_last_offset, padding_idx);
}

Bags embedding_bag_forward_only(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                                bool scale_grad_by_freq, int64_t mode, bool sparse, const OptT& psw,
                                bool include_last_offset, int64_t padding_idx) {
  if (auto r = bag_forward(weight, indices, offsets, mode, psw, include_last_offset, padding_idx, true))
    return *r;
  return call_cpu_fallback<at::_ops::_embedding_bag_forward_only>(
      weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset, padding_idx);
}

// ---- backward ------------------------------------------------------------------------

// Index tensors in one type (int64 when they differ, as on the CPU), contiguous.
std::vector<Tensor> index_operands(std::vector<Tensor> ts) {
  bool same = true;
  for (const auto& t : ts) same = same && (!t.defined() || t.scalar_type() == ts[0].scalar_type());
  for (auto& t : ts) {
    if (!t.defined()) continue;
    if (!same) t = t.to(at::kLong);
    t = t.contiguous();
  }
  return ts;
}

// offset2bag as the forward's fast path leaves it (empty) recomputed from the offsets.
Tensor full_offset2bag(Context& ctx, const Tensor& offset2bag, const Tensor& indices,
                       const Tensor& offsets) {
  if (offset2bag.numel() != 0 || indices.numel() == 0) return offset2bag;
  Tensor o2b = at::empty({indices.numel()}, indices.options());
  nn::BagGeometry g;
  g.indices = u32(indices.numel());
  g.offsets = g.bags = u32(offsets.numel());
  nn::embedding_bag_aux(ctx, operand(indices), operand(offsets), g, operand(o2b), nn::Operand{});
  return o2b;
}

// The weight gradient, or nullopt when not native. `offsets` is only needed when
// offset2bag is empty (then it must be defined).
std::optional<Tensor> dense_backward(const Tensor& grad_in, const Tensor& indices_in,
                                     const Tensor& offsets_in, const Tensor& offset2bag_in,
                                     const Tensor& bag_size_in, const Tensor& max_indices_in,
                                     int64_t num_weights, bool scale_grad_by_freq, int64_t mode,
                                     const OptT& psw_opt, int64_t padding_idx) {
  Tensor psw = psw_opt.has_value() ? *psw_opt : Tensor();
  // scale_grad_by_freq: the CPU's own kernel (its per-index counts).
  if (!nn_float(grad_in) || grad_in.dim() != 2 || scale_grad_by_freq || mode < 0 || mode > 2 ||
      indices_in.dim() != 1 || !index_type(indices_in) || num_weights <= 0 ||
      num_weights * grad_in.size(1) > INT32_MAX || grad_in.numel() > INT32_MAX)
    return std::nullopt;
  if (psw.defined() && (mode != 0 || psw.scalar_type() != grad_in.scalar_type() ||
                        psw.numel() != indices_in.numel()))
    return std::nullopt;
  for (const Tensor* t : {&offsets_in, &offset2bag_in, &bag_size_in, &max_indices_in})
    if (t->defined() && (!index_type(*t) || t->device() != grad_in.device())) return std::nullopt;
  const int64_t bags = grad_in.size(0), dim = grad_in.size(1);
  if (mode == 2) {
    if (!max_indices_in.defined() || max_indices_in.sizes() != grad_in.sizes() ||
        !bag_size_in.defined() || bag_size_in.numel() != bags)
      return std::nullopt;
  } else {
    if (mode == 1 && (!bag_size_in.defined() || bag_size_in.numel() != bags)) return std::nullopt;
    if (offset2bag_in.numel() != indices_in.numel() &&
        !(offset2bag_in.numel() == 0 && offsets_in.defined() && offsets_in.dim() == 1))
      return std::nullopt;
  }
  auto ix = index_operands({indices_in, offsets_in, offset2bag_in, bag_size_in, max_indices_in});
  Tensor grad = grad_in.contiguous();
  Tensor gw = at::zeros({num_weights, dim}, grad.options().dtype(at::kFloat));
  nn::BagGeometry g;
  g.num_weights = u32(num_weights);
  g.dim = u32(dim);
  g.indices = u32(ix[0].numel());
  g.bags = u32(bags);
  g.mode = static_cast<nn::BagMode>(mode);
  g.padding_idx = padding_idx;
  if (gw.nbytes() > window_budget(Context::get()) && grad.numel() > 0) {
    // A table larger than one storage binding (see bag_forward): max bags add their
    // gradient at the rows that won (a windowed index_put_); sum and mean bags make one
    // gradient row per index position in a small table, added into the rows named.
    if (mode == 2) {
      Tensor rows = ix[4].to(at::kLong);
      Tensor cols = at::arange(dim, rows.options()).expand_as(rows);
      // Empty bags (size 0) have no winner, whatever their max index says.
      Tensor valid = rows.ge(0).logical_and(rows.lt(num_weights)).logical_and(ix[3].gt(0).unsqueeze(1));
      c10::List<std::optional<Tensor>> at_rows;
      at_rows.push_back(rows.masked_select(valid));
      at_rows.push_back(cols.masked_select(valid));
      gw.index_put_(at_rows, grad.to(at::kFloat).masked_select(valid), /*accumulate=*/true);
    } else if (g.indices > 0) {
      const int64_t n = ix[0].numel();
      Tensor order = at::arange(n, ix[0].options());
      if (padding_idx >= 0) order = at::where(ix[0].eq(padding_idx), at::full({}, n, ix[0].options()), order);
      auto small = dense_backward(grad_in, order, offsets_in, offset2bag_in, bag_size_in, max_indices_in, n + 1,
                                  false, mode, psw_opt, padding_idx >= 0 ? n : -1);
      if (!small) return std::nullopt;
      gw.index_add_(0, ix[0].to(at::kLong), small->narrow(0, 0, n).to(at::kFloat));
    }
  } else if (gw.numel() > 0 && grad.numel() > 0) {
    TWGPU_TRY
    RuntimeLock lock;
    Context& ctx = lock.ctx();
    if (mode == 2) {
      nn::embedding_bag_backward_max(ctx, operand(grad), operand(ix[3]), operand(ix[4]), g, operand(gw));
    } else if (g.indices > 0) {
      Tensor o2b = full_offset2bag(ctx, ix[2], ix[0], ix[1]);
      Tensor p = psw.defined() ? psw.contiguous() : psw;
      nn::embedding_bag_backward_sum(ctx, operand(grad), operand(ix[0]), operand(o2b),
                                     mode == 1 ? operand(ix[3]) : nn::Operand{}, operand(p), g,
                                     operand(gw));
    }
    TWGPU_CATCH
  }
  return grad.scalar_type() == at::kFloat ? gw : gw.to(grad.scalar_type());
}

Tensor embedding_bag_backward(const Tensor& grad, const Tensor& indices, const Tensor& offsets,
                              const Tensor& offset2bag, const Tensor& bag_size,
                              const Tensor& max_indices, c10::SymInt num_weights,
                              bool scale_grad_by_freq, int64_t mode, bool sparse,
                              const OptT& psw, int64_t padding_idx) {
  const int64_t nw = num_weights.guard_int(__FILE__, __LINE__);
  if (!sparse && offsets.dim() == 1 && index_type(offsets)) {
    if (auto r = dense_backward(grad, indices, offsets, offset2bag, bag_size, max_indices, nw,
                                scale_grad_by_freq, mode, psw, padding_idx))
      return *r;
  }
  return call_cpu_fallback<at::_ops::_embedding_bag_backward>(grad, indices, offsets, offset2bag, bag_size,
                                                              max_indices, nw, scale_grad_by_freq,
                                                              mode, sparse, psw, padding_idx);
}

Tensor embedding_bag_dense_backward(const Tensor& grad, const Tensor& indices,
                                    const Tensor& offset2bag, const Tensor& bag_size,
                                    const Tensor& max_indices, c10::SymInt num_weights,
                                    bool scale_grad_by_freq, int64_t mode, const OptT& psw,
                                    int64_t padding_idx) {
  const int64_t nw = num_weights.guard_int(__FILE__, __LINE__);
  if (auto r = dense_backward(grad, indices, Tensor(), offset2bag, bag_size, max_indices, nw,
                              scale_grad_by_freq, mode, psw, padding_idx))
    return *r;
  return call_cpu_fallback<at::_ops::_embedding_bag_dense_backward>(
      grad, indices, offset2bag, bag_size, max_indices, nw, scale_grad_by_freq, mode, psw,
      padding_idx);
}

Tensor embedding_bag_psw_backward(const Tensor& grad, const Tensor& weight, const Tensor& indices,
                                  const Tensor& offsets, const Tensor& offset2bag, int64_t mode,
                                  int64_t padding_idx) {
  const bool native = mode == 0 && nn_float(grad) && grad.dim() == 2 && weight.dim() == 2 &&
                      weight.scalar_type() == grad.scalar_type() && weight.size(1) == grad.size(1) &&
                      indices.dim() == 1 && offsets.dim() == 1 && index_type(indices) &&
                      index_type(offsets) && index_type(offset2bag) &&
                      (offset2bag.numel() == indices.numel() || offset2bag.numel() == 0) &&
                      weight.numel() > 0 && weight.numel() <= INT32_MAX && grad.numel() <= INT32_MAX;
  if (!native)
    return call_cpu_fallback<at::_ops::_embedding_bag_per_sample_weights_backward>(
        grad, weight, indices, offsets, offset2bag, mode, padding_idx);
  Tensor out = at::zeros({indices.numel()}, grad.options());
  if (indices.numel() == 0 || grad.numel() == 0) return out;
  auto ix = index_operands({indices, offsets, offset2bag});
  Tensor gr = grad.contiguous(), w = weight.contiguous();
  nn::BagGeometry g;
  g.num_weights = u32(weight.size(0));
  g.dim = u32(weight.size(1));
  g.indices = u32(indices.numel());
  g.bags = u32(grad.size(0));
  g.padding_idx = padding_idx;
  TWGPU_TRY
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Tensor o2b = full_offset2bag(ctx, ix[2], ix[0], ix[1]);
  nn::embedding_bag_psw_backward(ctx, operand(gr), operand(w), operand(ix[0]), operand(o2b), g,
                                 operand(out));
  TWGPU_CATCH
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_forward_only));
  m.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward));
  m.impl("_embedding_bag_per_sample_weights_backward", TORCH_FN(embedding_bag_psw_backward));
}

}  // namespace twgpu::aten
