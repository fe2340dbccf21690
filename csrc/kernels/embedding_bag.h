// Embedding bag kernels: bags of rows of a weight matrix [num_weights, dim] reduced by
// sum (optionally weighted per index), mean or max, bags given by offsets into a 1-d
// index list; with a padding index whose rows are skipped. Sums accumulate in f32.
// Indices or offsets out of range are skipped (never read) and reported through the
// device error word (runtime/device_checks.h).
#pragma once
#include "kernels/nn_program.h"

namespace twgpu::nn {

enum class BagMode : uint8_t { Sum = 0, Mean = 1, Max = 2 };  // ATen's values

struct BagGeometry {
  uint32_t num_weights = 0, dim = 0;
  uint32_t indices = 0;   // numel of the index list
  uint32_t offsets = 0;   // numel of offsets
  uint32_t bags = 0;      // offsets, or offsets - 1 with include_last_offset
  BagMode mode = BagMode::Sum;
  int64_t padding_idx = -1;  // < 0: none
  // Sums and means end bags at the next offset (the CPU's fast path) rather than at the
  // offset2bag end (its general path).
  bool offsets_end = true;
};

// Sets the error word when an index is outside [0, num_weights) (`index_code`) or the
// offsets do not start at 0, decrease, or pass the end of the index list (`offset_code`).
void embedding_bag_check(Context& ctx, const Operand& indices, const Operand& offsets,
                         const BagGeometry& g, uint32_t index_code, uint32_t offset_code);

// output [bags, dim] (weight dtype); max_indices [bags, dim] (max mode only, else absent).
// `psw`: per-sample weights (sum mode) or absent.
void embedding_bag_forward(Context& ctx, const Operand& weight, const Operand& indices,
                           const Operand& offsets, const Operand& psw, const BagGeometry& g,
                           const Operand& output, const Operand& max_indices);

// offset2bag [indices] (absent: not computed) and bag_size [bags] (non-padding entries per
// bag; absent: not computed).
void embedding_bag_aux(Context& ctx, const Operand& indices, const Operand& offsets,
                       const BagGeometry& g, const Operand& offset2bag, const Operand& bag_size);

// Backward. grad [bags, dim]; grad_weight: f32, zeroed, [num_weights, dim] (atomic adds).
// Sum/mean: every entry j adds grad[offset2bag[j]] (times psw[j], or over the bag's size
// for mean) to its row; padding rows get nothing.
void embedding_bag_backward_sum(Context& ctx, const Operand& grad, const Operand& indices,
                                const Operand& offset2bag, const Operand& bag_size,
                                const Operand& psw, const BagGeometry& g,
                                const Operand& grad_weight);
// Max: grad[b, d] goes to row max_indices[b, d] for non-empty bags.
void embedding_bag_backward_max(Context& ctx, const Operand& grad, const Operand& bag_size,
                                const Operand& max_indices, const BagGeometry& g,
                                const Operand& grad_weight);
// Gradient of per_sample_weights: out[j] = <grad[offset2bag[j]], weight[indices[j]]>.
void embedding_bag_psw_backward(Context& ctx, const Operand& grad, const Operand& weight,
                                const Operand& indices, const Operand& offset2bag,
                                const BagGeometry& g, const Operand& out);

}  // namespace twgpu::nn
