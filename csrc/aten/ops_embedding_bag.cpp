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
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/cpu_fallback.h"
#include "aten/nn_common.h"
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag", TORCH_FN(embedding_bag));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_forward_only));
}

}  // namespace twgpu::aten
