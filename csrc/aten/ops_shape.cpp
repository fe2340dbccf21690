// Shape and copy ops, native: cat (one kernel moving words where inputs and output are
// contiguous, of one dtype, with whole-word rows; else one device copy per input into a
// narrow() view of the output, so every dtype and promotion the copy handles), flip, roll, tril/triu (a gather
// copy that moves raw element bits, float64 and complex included), narrow_copy.out and
// repeat_interleave.Tensor.
//
// Argument checks, error messages and out= resizing are the CPU's: structured ops run
// their meta function; flip reuses ATen's dim check; the others repeat the CPU kernel's
// checks (roll also runs its meta kernel on a "meta twin": same sizes, strides, dtype).
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorShape.h>
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/min.h>
#include <ATen/ops/roll.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <torch/library.h>

#include <bitset>

#include "aten/webgpu_tensor.h"
#include "aten/structured_meta.h"
#include "kernels/binding_window.h"
#include "kernels/shape_ops.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

at::Tensor meta_twin(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}


// ---- gather copies (flip, roll, tril/triu) ----------------------------------------------

struct GatherSpec {
  std::vector<bool> flip;        // per dim (empty: none)
  std::vector<int64_t> shift;    // per dim, in [0, size) (empty: none)
  TriangleMask mask = TriangleMask::None;
  int64_t diagonal = 0;
};

// True when a gather may write `out` in place: contiguous, not sharing the source's
// buffer, and owning every word it covers (narrow dtypes are written as whole words).
bool writable_directly(const at::Tensor& out, const at::Tensor& src) {
  if (!out.is_contiguous() || allocation_of(out) == allocation_of(src)) return false;
  if (out.element_size() >= 4) return true;
  uint64_t begin = byte_offset_of(out), bytes = out.nbytes();
  return begin % 4 == 0 && (bytes % 4 == 0 || begin + bytes == out.storage().nbytes());
}

// out (same sizes as self) = the gather of self described by `spec`.
void gather_into(const at::Tensor& out, const at::Tensor& self, const GatherSpec& spec) {
  if (out.numel() == 0) return;
  if (!writable_directly(out, self)) {
    at::Tensor tmp = at::empty(self.sizes(), self.options());
    gather_into(tmp, self, spec);
    out.copy_(tmp);
    return;
  }
  if (!self.is_contiguous() && self.storage().nbytes() > window_budget(Context::get())) {
    // A strided view of a buffer larger than one binding: pieces of a gather are rows of
    // its outermost dim, which fit a window when the source is laid out as the output.
    gather_into(out, self.contiguous(), spec);
    return;
  }
  DeviceRef src = device_ref(self), dst = device_ref(out);
  GatherCopy g;
  g.src = src.buffer;
  g.dst = dst.buffer;
  g.elem_size = static_cast<int>(self.element_size());
  g.src_offset = static_cast<int64_t>(src.offset);
  g.dst_word = dst.offset * g.elem_size / 4;
  g.numel = static_cast<uint64_t>(self.numel());
  g.mask = spec.mask;
  g.diagonal = spec.diagonal;
  for (int64_t d = 0; d < self.dim(); ++d) {
    GatherDim gd;
    int64_t n = self.size(d), stride = self.stride(d);
    TORCH_CHECK(n <= INT32_MAX && std::abs(stride) <= INT32_MAX,
                "torch_webgpu: tensor too large for a gather copy");
    gd.size = static_cast<uint32_t>(n);
    gd.stride = static_cast<int32_t>(stride);
    if (!spec.flip.empty() && spec.flip[d]) {
      g.src_offset += (n - 1) * stride;
      gd.stride = -gd.stride;
    }
    if (!spec.shift.empty()) gd.shift = static_cast<uint32_t>(spec.shift[d]);
    g.dims.push_back(gd);
  }
  TWGPU_TRY
  RuntimeLock lock;
  launch_gather_copy(lock.ctx(), g);
  TWGPU_CATCH
}

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  // The CPU's own dim check (wraps, rejects duplicates).
  std::bitset<at::dim_bitset_size> flipped = at::dim_list_to_bitset(dims, self.dim());
  at::Tensor out = at::empty_like(self, c10::MemoryFormat::Preserve);
  GatherSpec spec;
  spec.flip.assign(self.dim(), false);
  for (int64_t d = 0; d < self.dim(); ++d) spec.flip[d] = flipped[d];
  gather_into(out, self, spec);
  return out;
}

at::Tensor roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  // The CPU's checks and messages first; its meta kernel words them differently.
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  TORCH_CHECK((dims.empty() && shifts.size() == 1) || shifts.size() == dims.size(),
              "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:",
              dims.size());
  TORCH_CHECK_INDEX(self.dim() > 0 || dims.empty(), "Dimension specified as ", dims[0],
                    " but tensor has no dimensions");
  // PyTorch's meta function for roll is Python (slow): run it only for dims it rejects.
  bool dims_ok = true;
  for (int64_t d : dims) dims_ok = dims_ok && d >= -self.dim() && d < self.dim();
  if (!dims_ok) at::roll(meta_twin(self), shifts, dims);
  if (dims.empty() && shifts.size() == 1) {
    // Roll of the flattened tensor, shaped back.
    at::Tensor flat = self.contiguous().view({-1});
    at::Tensor out = at::empty({flat.numel()}, self.options());
    GatherSpec spec;
    int64_t n = flat.numel();
    spec.shift = {n == 0 ? 0 : ((shifts[0] % n) + n) % n};
    gather_into(out, flat, spec);
    return out.view(self.sizes());
  }
  at::Tensor out = at::empty_like(self, c10::MemoryFormat::Preserve);
  GatherSpec spec;
  spec.shift.assign(self.dim(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = c10::maybe_wrap_dim(dims[i], self.dim());
    int64_t n = self.size(d);
    if (n > 0) spec.shift[d] = (((spec.shift[d] + shifts[i]) % n) + n) % n;
  }
  gather_into(out, self, spec);
  return out;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  OutMeta<at::meta::structured_tril> m(out);
  m.meta(self, diagonal);
  gather_into(out, self, {{}, {}, TriangleMask::Lower, diagonal});
  return out;
}

at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  OutMeta<at::meta::structured_triu> m(out);
  m.meta(self, diagonal);
  gather_into(out, self, {{}, {}, TriangleMask::Upper, diagonal});
  return out;
}

// ---- cat --------------------------------------------------------------------------------

// The stride, in elements, between t's rows (its dims before `dim` flattened) when each
// row is one contiguous block (the dims from `dim` on contiguous among themselves, those
// before it collapsing to one stride): a contiguous tensor, or a slice along the last dims
// such as rotary embeddings' x[..., :half]. -1 otherwise.
int64_t row_block_stride(const at::Tensor& t, int64_t dim) {
  int64_t block = 1;
  for (int64_t d = t.dim() - 1; d >= dim; --d) {
    if (t.size(d) != 1 && t.stride(d) != block) return -1;
    block *= t.size(d);
  }
  int64_t row = -1, next = 0;
  for (int64_t d = dim - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (row < 0) row = t.stride(d);
    else if (t.stride(d) != next) return -1;
    next = t.stride(d) * t.size(d);
  }
  return row < 0 ? block : row;
}

// cat as one kernel moving 32-bit words (launch_cat_words): every input's rows contiguous
// blocks (row_block_stride), of out's dtype, in a buffer other than out's, and each
// input's rows, row stride and offset whole words. False (nothing done) otherwise: the
// copy per input below serves.
bool cat_as_words(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  if (!out.is_contiguous() || out.numel() == 0) return false;
  const int64_t item = out.element_size();
  int64_t rows = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) rows *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  Allocation* out_alloc = allocation_of(out);
  const uint64_t out_byte = byte_offset_of(out);
  if (out_byte % 4) return false;
  std::vector<CatInput> inputs;
  for (const at::Tensor& t : tensors) {
    if (at::native::cat_should_skip_tensor(t) || t.size(dim) == 0) continue;
    const uint64_t row_bytes = static_cast<uint64_t>(t.size(dim) * inner * item);
    const int64_t stride = row_block_stride(t, dim);
    if (t.scalar_type() != out.scalar_type() || stride < 0 || allocation_of(t) == out_alloc ||
        byte_offset_of(t) % 4 || row_bytes % 4 || (stride * item) % 4)
      return false;
    inputs.push_back({allocation_of(t)->buffer, byte_offset_of(t) / 4, row_bytes / 4,
                      static_cast<uint64_t>(stride * item) / 4});
  }
  if (inputs.size() < 2) return false;  // one input: its copy is one dispatch already
  TWGPU_TRY
  RuntimeLock lock;
  if (!cat_words_fits(lock.ctx(), inputs, static_cast<uint64_t>(rows), out_byte / 4)) return false;
  launch_cat_words(lock.ctx(), inputs, out_alloc->buffer, out_byte / 4, static_cast<uint64_t>(rows));
  TWGPU_CATCH
  return true;
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  OutMeta<at::meta::structured_cat> m(out);
  auto pre = m.meta(tensors, dim);
  for (const at::Tensor& t : tensors)
    TORCH_CHECK(t.device() == out.device(),
                "Expected all tensors to be on the same device, but found at least two "
                "devices, ", out.device(), " and ", t.device(), "!");
  if (cat_as_words(tensors, pre.dim, out)) return out;
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    if (at::native::cat_should_skip_tensor(t)) continue;
    int64_t n = t.size(pre.dim);
    if (n > 0) out.narrow(pre.dim, offset, n).copy_(t);
    offset += n;
  }
  return out;
}

// ---- narrow_copy, repeat_interleave ------------------------------------------------------

at::Tensor& narrow_copy_out(const at::Tensor& self, int64_t dim, c10::SymInt start_,
                            c10::SymInt length_, at::Tensor& out) {
  // The CPU kernel's checks and messages (its meta kernel words them differently).
  int64_t start = start_.expect_int(), length = length_.expect_int();
  // (Unmessaged checks quote their expression: the CPU's spelling is kept.)
  const at::Tensor& output = out;
  const auto self_sizes = self.sizes();
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  TORCH_CHECK(self.dtype() == output.dtype());
  if (dim < 0) {
    dim = c10::maybe_wrap_dim(dim, self.dim());
  } else {
    TORCH_CHECK(dim < static_cast<int64_t>(self_sizes.size()));
  }
  const int64_t cur_size = self.size(dim);
  TORCH_CHECK_INDEX(-cur_size <= start && start <= cur_size,
                    "start out of range (expected to be in range of [", -cur_size, ", ",
                    cur_size, "], but got ", start, ")");
  if (start < 0) start += cur_size;
  TORCH_CHECK(length >= 0 && start <= cur_size - length, "start (", start, ") + length (",
              length, ") exceeds dimension size (", cur_size, ").");
  std::vector<int64_t> sizes = self.sizes().vec();
  sizes[dim] = length;
  out.resize_(sizes);  // the CPU kernel resizes without a warning
  out.copy_(self.narrow(dim, start, length));
  return out;
}

at::Tensor narrow_copy(const at::Tensor& self, int64_t dim, c10::SymInt start,
                       c10::SymInt length) {
  at::Tensor out = at::empty({0}, self.options());
  return narrow_copy_out(self, dim, std::move(start), std::move(length), out);
}

at::Tensor repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  // The CPU dispatches on the index type before any other check.
  TORCH_CHECK_NOT_IMPLEMENTED(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
                              "\"repeat_interleave_webgpu\" not implemented for '",
                              c10::toString(repeats.scalar_type()), "'");
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  if (repeats.size(0) == 0) return at::empty_like(repeats, at::MemoryFormat::Contiguous);
  // The output size depends on the values: read the (short) repeats back once.
  at::Tensor host = repeats.cpu();
  at::Tensor ends = at::cumsum(host, 0, at::kLong);
  int64_t sum = ends[-1].item<int64_t>();
  TORCH_CHECK(at::min(host).item<int64_t>() >= 0, "repeats can not be negative");
  int64_t total = output_size.has_value() ? output_size->expect_int() : sum;
  TORCH_CHECK(total == sum, "allocated size does not match required size");
  at::Tensor out = at::empty({total}, repeats.options());
  if (total == 0) return out;
  TORCH_CHECK(repeats.size(0) <= UINT32_MAX && total <= UINT32_MAX,
              "torch_webgpu: repeat_interleave output too large");
  at::Tensor dev_ends = ends.to(repeats.device());
  DeviceRef e = device_ref(dev_ends), o = device_ref(out);
  TWGPU_TRY
  RuntimeLock lock;
  launch_repeat_index(lock.ctx(), e.buffer, e.offset, static_cast<uint32_t>(repeats.size(0)),
                      o.buffer, static_cast<uint64_t>(total), o.dtype);
  TWGPU_CATCH
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("flip", TORCH_FN(flip));
  m.impl("roll", TORCH_FN(roll));
  m.impl("tril.out", TORCH_FN(tril_out));
  m.impl("triu.out", TORCH_FN(triu_out));
  m.impl("narrow_copy", TORCH_FN(narrow_copy));
  m.impl("narrow_copy.out", TORCH_FN(narrow_copy_out));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave));
}

}  // namespace twgpu::aten
