// GEMM autotuning, cudnn.benchmark's idea for our matrix products (no torch headers).
//
// With autotuning on (TORCH_WEBGPU_GEMM_AUTOTUNE=1, or torch.compile's max-autotune modes
// for the graphs they compile), the first product of a shape (sizes, dtypes, which operand
// dims are contiguous, bias or not) times each plausible variant of gemm (tiles of three
// sizes, split-K, register blocks, the GEMVs, a tree or an invocation per output) on a
// scratch output and keeps the fastest for that shape; later products of the shape take
// it at once. The variants compute the same sums in other orders, so results move by
// rounding only. Inside a graph capture nothing is timed (a host wait would be refused):
// a shape not tuned yet takes the heuristic's variant.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "kernels/matmul.h"

namespace twgpu {

// Turns autotuning on or off for this process; returns the previous setting. (Its first
// value comes from TORCH_WEBGPU_GEMM_AUTOTUNE.)
bool set_gemm_autotune(bool on);
bool gemm_autotune_enabled();
// The variant (a TORCH_WEBGPU_GEMM_VARIANT value; "" is the heuristic's choice) for `d`'s
// shape: tuned now if it was not. Called by gemm with the runtime lock held.
std::string gemm_tuned_variant(Context& ctx, const GemmDesc& d);
// Every shape tuned so far: (shape, chosen variant), and forgetting them.
std::vector<std::pair<std::string, std::string>> gemm_autotune_choices();
void clear_gemm_autotune();

// gemm's product with the variant named as TORCH_WEBGPU_GEMM_VARIANT would name it (for
// the autotuner's trials; matmul.cpp).
void gemm_with_variant(Context& ctx, const GemmDesc& d, std::string variant);

}  // namespace twgpu
