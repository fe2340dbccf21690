// Runs an ATen structured op's meta function (argument checks, output dtype and shape)
// against our outputs, the way PyTorch's generated wrappers do: an undefined output is
// allocated (functional calls), a given one is checked and resized (out= calls), keeping
// the strides or memory format the meta function asks for when it had to resize.
#pragma once
#include <ATen/TensorMeta.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <array>
#include <vector>

// Releases before 2.13 pass dimension names to set_output_* (named tensors).
#if __has_include(<ATen/core/Dimname.h>)
#include <ATen/core/Dimname.h>
#define TWGPU_META_HAS_NAMES 1
#endif

namespace twgpu::aten {

template <class Meta, size_t N = 1>
struct OutMeta final : Meta {
  explicit OutMeta(std::array<at::Tensor*, N> outs) : outs_(outs) {}
  // One given output (out= kernels).
  explicit OutMeta(const at::Tensor& out) : outs_{const_cast<at::Tensor*>(&out)} {
    static_assert(N == 1, "one output");
  }

  const at::Tensor& maybe_get_output(int64_t i) override { return *outs_[i]; }

  // No `override`: torch 2.13 declares (sizes, strides, options), earlier releases add the
  // dimension names; whichever the base declares is overridden.
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options) {
    set(i, sizes, strides, options);
  }
#ifdef TWGPU_META_HAS_NAMES
  void set_output_raw_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                              at::TensorOptions options, at::DimnameList) {
    set(i, sizes, strides, options);
  }
#endif
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options) {
    set(i, sizes, strides, options);
  }
#ifdef TWGPU_META_HAS_NAMES
  void set_output_strided(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
                          at::TensorOptions options, at::DimnameList) {
    set(i, sizes, strides, options);
  }
#endif

 private:
  void set(int64_t i, at::IntArrayRef sizes, at::IntArrayRef strides,
           const at::TensorOptions& options) {
    at::Tensor& out = *outs_[i];
    if (!out.defined()) {
      out = strides.empty() ? at::empty(sizes, options)
                            : at::empty_strided(sizes, strides, options);
      return;
    }
    TORCH_CHECK(options.dtype() == out.dtype(), "Expected out tensor to have dtype ",
                options.dtype(), ", but got ", out.dtype(), " instead");
    // As CUDA's generated wrappers: an out= tensor on another device is a mixed-device call.
    TORCH_CHECK(options.device() == out.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                options.device(), " and ", out.device(), "!");
    if (at::native::resize_output(out, sizes)) {
      if (!strides.empty()) {
        out.as_strided_(sizes, strides);
      } else if (options.memory_format_opt().has_value()) {
        out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
      }
    }
  }
  std::array<at::Tensor*, N> outs_;
};

// `value` (at least 2-D) as batched column-major matrices: the layout the CPU (LAPACK) and
// the meta functions give linear-algebra results and nonzero's. torch.compile checks an
// extern kernel's output strides against the meta function's. A copy unless it already is.
inline at::Tensor column_major(const at::Tensor& value) {
  const int64_t d = value.dim();
  std::vector<int64_t> strides(d);
  strides[d - 2] = 1;
  int64_t step = std::max<int64_t>(value.size(d - 2), 1);
  strides[d - 1] = step;
  step *= std::max<int64_t>(value.size(d - 1), 1);
  for (int64_t i = d - 3; i >= 0; --i) {
    strides[i] = step;
    step *= std::max<int64_t>(value.size(i), 1);
  }
  if (value.strides() == at::IntArrayRef(strides)) return value;
  at::Tensor out = at::empty_strided(value.sizes(), strides, value.options());
  out.copy_(value);
  return out;
}

}  // namespace twgpu::aten
