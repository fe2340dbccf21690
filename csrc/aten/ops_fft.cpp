// The FFT family (torch.fft.*, stft/istft reach these): aten::_fft_r2c, _fft_c2c and
// _fft_c2r on float32 / complex64, plus the complex helpers they use (conj_physical) and
// complex/polar (elementwise kernels). Multi-dimensional transforms are successive 1-D transforms
// (kernels/fft) on contiguous temporaries; the normalization scale is applied by the
// last one. Tensors larger than one binding run in pieces of their batch dims, and a
// signal longer than a binding holds as a four-step transform (over_batch_pieces,
// four_step_c2c). Other dtypes (float16, bfloat16, float64, complex128), invalid arguments and
// lengths the adapter cannot loop over go to the CPU fallback, which computes or raises.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_fft_c2c_ops.h>
#include <ATen/ops/_fft_c2r_ops.h>
#include <ATen/ops/_fft_r2c_ops.h>
#include <ATen/ops/complex_ops.h>
#include <ATen/ops/conj_physical_ops.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/real.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/Context.h>
#include <ATen/ops/polar_ops.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <vector>

#include "aten/cpu_fallback.h"
#include "aten/iterator_launch.h"
#include "aten/webgpu_tensor.h"
#include "kernels/binding_window.h"
#include "kernels/fft.h"
#include "runtime/runtime.h"

namespace twgpu::aten {
namespace {

using at::Tensor;

// The CPU fallback for ops whose schema has SymInt arguments.
template <class Op, class... Args>
decltype(auto) call_cpu_fallback_symint(Args&&... args) {
  return at::native::call_fallback_fn_symint<&webgpu_cpu_fallback, Op>::call(
      std::forward<Args>(args)...);
}

bool on_device(const Tensor& t) { return t.defined() && t.device().type() == kDeviceType; }

// The radices of the Stockham passes for length n: 4s, then prime factors ({1} for n = 1).
std::vector<int64_t> factors(int64_t n) {
  std::vector<int64_t> f;
  while (n % 4 == 0) {
    f.push_back(4);
    n /= 4;
  }
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      f.push_back(p);
      n /= p;
    }
  if (n > 1 || f.empty()) f.push_back(n);
  return f;
}

// False when a pass's loop (as many iterations as its radix: a large prime factor makes
// a long direct DFT) would meet the adapter's loop limit (llvmpipe stops loops after
// 65535 iterations): such calls use the CPU.
bool length_fits(int64_t n) {
  if (n <= 1) return true;
  RuntimeLock lock;
  uint64_t limit = lock.ctx().caps().max_loop_iterations;
  if (limit == 0) return true;
  int64_t largest = 1;
  for (int64_t r : factors(n)) largest = std::max(largest, r);
  return static_cast<double>(largest) < 0.9 * static_cast<double>(limit);
}

// The wrapped dims when every one is in range and none repeats.
std::optional<std::vector<int64_t>> wrapped_dims(at::IntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> out;
  for (int64_t d : dim) {
    if (d < -ndim || d >= ndim || ndim == 0) return std::nullopt;
    int64_t w = d < 0 ? d + ndim : d;
    for (int64_t e : out)
      if (e == w) return std::nullopt;
    out.push_back(w);
  }
  return out;
}

float norm_scale(int64_t normalization, double n) {
  if (normalization == 1) return static_cast<float>(1.0 / std::sqrt(n));
  if (normalization == 2) return static_cast<float>(1.0 / n);
  return 1.0f;
}

// (cos, sin)(2 pi t / n) for t < n, on the device.
Tensor twiddle_table(int64_t n, const Tensor& like) {
  Tensor host = at::empty({2 * n}, at::TensorOptions().dtype(c10::kFloat));
  float* p = host.data_ptr<float>();
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t t = 0; t < n; ++t) {
    double a = two_pi * static_cast<double>(t) / static_cast<double>(n);
    p[2 * t] = static_cast<float>(std::cos(a));
    p[2 * t + 1] = static_cast<float>(std::sin(a));
  }
  return host.to(like.device());
}

int64_t prod(at::IntArrayRef s, int64_t from, int64_t to) {
  int64_t p = 1;
  for (int64_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// One 1-D transform of length n along `axis` of contiguous `in` into contiguous `out`
// (same sizes except along axis).
void transform_axis(const Tensor& in, FftInput input, const Tensor& out, FftOutput output,
                    int64_t axis, int64_t n, bool positive, float scale) {
  if (out.numel() == 0) return;
  const int64_t nd = in.dim();
  FftPass p;
  p.input = input;
  p.output = output;
  p.outer = static_cast<uint64_t>(prod(in.sizes(), 0, axis));
  p.inner = static_cast<uint64_t>(prod(in.sizes(), axis + 1, nd));
  p.n = static_cast<uint64_t>(n);
  p.in_len = static_cast<uint64_t>(in.size(axis));
  p.out_len = static_cast<uint64_t>(out.size(axis));
  p.positive_exponent = positive;
  Tensor tw = twiddle_table(n, in);
  DeviceRef twr = device_ref(tw), ir = device_ref(in), orf = device_ref(out);
  p.twiddles = twr.buffer;
  p.twiddle_offset = twr.offset;
  const std::vector<int64_t> radices = factors(n);
  const size_t passes = radices.size();
  // Ping-pong temporaries of the full length for the intermediate passes.
  std::vector<int64_t> mid_sizes(in.sizes().begin(), in.sizes().end());
  mid_sizes[axis] = n;
  Tensor tmp[2];
  for (size_t k = 0; k + 1 < passes && k < 2; ++k)
    tmp[k] = at::empty(mid_sizes, in.options().dtype(c10::kComplexFloat));
  TWGPU_TRY
  RuntimeLock lock;
  uint64_t span = 1;
  for (size_t k = 0; k < passes; ++k) {
    FftPass q = p;
    const bool first = k == 0, last = k + 1 == passes;
    DeviceRef src = first ? ir : device_ref(tmp[(k + 1) % 2]);
    DeviceRef dst = last ? orf : device_ref(tmp[k % 2]);
    q.in = src.buffer;
    q.in_offset = src.offset;
    q.out = dst.buffer;
    q.out_offset = dst.offset;
    if (!first) {
      q.input = FftInput::Complex;
      q.in_len = p.n;
    }
    if (!last) {
      q.output = FftOutput::Complex;
      q.out_len = p.n;
    }
    q.scale = last ? scale : 1.0f;
    fft_pass(lock.ctx(), q, span, static_cast<uint64_t>(radices[k]));
    span *= static_cast<uint64_t>(radices[k]);
  }
  TWGPU_CATCH
}

Tensor complex_like(const Tensor& t, at::IntArrayRef sizes) {
  return at::empty(sizes, t.options().dtype(c10::kComplexFloat));
}

// c2c over `dims` (in order) of contiguous complex `x`; the last applies `scale`.
Tensor c2c_dims(Tensor x, const std::vector<int64_t>& dims, bool positive, float scale) {
  for (size_t k = 0; k < dims.size(); ++k) {
    Tensor y = complex_like(x, x.sizes());
    transform_axis(x, FftInput::Complex, y, FftOutput::Complex, dims[k], x.size(dims[k]),
                   positive, k + 1 == dims.size() ? scale : 1.0f);
    x = y;
  }
  return x;
}

bool dims_nonempty(const Tensor& t, const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (t.size(d) == 0 || !length_fits(t.size(d))) return false;
  return !dims.empty();
}

// An element in, as complex scratch and output, several times over.
constexpr uint64_t kBytesPerElement = 4 * sizeof(float) * 2;

bool exceeds_one_pass(int64_t elements) {
  return static_cast<uint64_t>(elements) * kBytesPerElement > window_budget(Context::get());
}

// Transforms of tensors larger than one storage binding: the dims the transform leaves
// alone flattened into one batch dim (transformed dims last, in `dims` order), pieces of
// it transformed alone (`transform(piece, piece_dims)`), joined and laid back out.
// nullopt when everything fits, or when one transform (all its dims) is itself too large.
std::optional<Tensor> over_batch_pieces(
    const Tensor& self, const std::vector<int64_t>& dims,
    const std::function<Tensor(const Tensor&, const std::vector<int64_t>&)>& transform) {
  if (!exceeds_one_pass(self.numel())) return std::nullopt;
  std::vector<int64_t> order, transformed_sizes{-1};
  for (int64_t d = 0; d < self.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  int64_t one_transform = 1;
  for (int64_t d : dims) {
    order.push_back(d);
    transformed_sizes.push_back(self.size(d));
    one_transform *= self.size(d);
  }
  if (exceeds_one_pass(one_transform)) return std::nullopt;
  const int64_t batch = self.numel() / one_transform;
  const int64_t step = static_cast<int64_t>(window_budget(Context::get()) /
                                            (static_cast<uint64_t>(one_transform) * kBytesPerElement));
  Tensor rows = self.permute(order).reshape(transformed_sizes);
  std::vector<int64_t> piece_dims;
  for (size_t k = 0; k < dims.size(); ++k) piece_dims.push_back(static_cast<int64_t>(k) + 1);
  std::vector<Tensor> parts;
  for (int64_t lo = 0; lo < batch; lo += step)
    parts.push_back(transform(rows.narrow(0, lo, std::min(step, batch - lo)).clone(at::MemoryFormat::Contiguous),
                              piece_dims));
  Tensor joined = at::cat(parts, 0);
  // Back to self's layout: the batch dims unflattened, then the inverse permutation.
  std::vector<int64_t> permuted_sizes;
  for (size_t k = 0; k + dims.size() < order.size(); ++k) permuted_sizes.push_back(self.size(order[k]));
  for (size_t k = 0; k < dims.size(); ++k) permuted_sizes.push_back(joined.size(static_cast<int64_t>(k) + 1));
  std::vector<int64_t> inverse(order.size());
  for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
  return joined.reshape(permuted_sizes).permute(inverse).contiguous();
}

// ---- One signal longer than a binding holds: a four-step transform ----
// A signal of length n = n1 * n2 read as an [n1, n2] matrix (entry [j1, j2] = x[j1 * n2 + j2]):
// transforms of its columns (length n1), a twiddle exp(-+2 pi i k1 j2 / n),
// transforms of its rows (length n2); entry [k1, k2] is X[k1 + n1 * k2], so the result is
// read transposed. Every step is an op that splits its own work.

// n = n1 * n2 with both transforms fitting one pass; nullopt when n has no such split.
std::optional<std::pair<int64_t, int64_t>> four_step_split(int64_t n) {
  const int64_t most = static_cast<int64_t>(window_budget(Context::get()) / kBytesPerElement);
  for (int64_t n1 = std::max<int64_t>(2, (n + most - 1) / most); n1 <= most && n1 < n; ++n1)
    if (n % n1 == 0 && n / n1 <= most && length_fits(n1) && length_fits(n / n1))
      return std::make_pair(n1, n / n1);
  return std::nullopt;
}

// exp(sign 2 pi i k1 j2 / n) as [n1, n2] complex on the device: with j2 = h * s + l, the
// product of an [n1, h] and an [n1, s] table (s ~ sqrt(n2)) made in double precision on
// the host, so no table of n entries crosses the bus.
Tensor four_step_twiddles(int64_t n1, int64_t n2, int64_t n, bool forward, const Tensor& like) {
  const int64_t s = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n2))));
  const int64_t h = (n2 + s - 1) / s;
  const double sign = forward ? -1.0 : 1.0, two_pi = 6.283185307179586476925286766559;
  auto table = [&](int64_t cols, int64_t step) {
    Tensor host = at::empty({n1, cols}, at::TensorOptions().dtype(c10::kComplexFloat));
    auto* p = reinterpret_cast<float*>(host.data_ptr());
    for (int64_t k1 = 0; k1 < n1; ++k1)
      for (int64_t c = 0; c < cols; ++c) {
        const double a = sign * two_pi * static_cast<double>((k1 * c * step) % n) / static_cast<double>(n);
        p[2 * (k1 * cols + c)] = static_cast<float>(std::cos(a));
        p[2 * (k1 * cols + c) + 1] = static_cast<float>(std::sin(a));
      }
    return host.to(like.device());
  };
  Tensor high = table(h, s).unsqueeze(2), low = table(s, 1).unsqueeze(1);
  return high.mul(low).reshape({n1, h * s}).narrow(1, 0, n2);
}

std::optional<Tensor> c2c_native(const Tensor& self, c10::SymIntArrayRef dim, int64_t normalization,
                                 bool forward);

Tensor c2c_along(const Tensor& x, int64_t dim, bool forward) {
  const std::vector<int64_t> one{dim};
  auto r = c2c_native(x, c10::fromIntArrayRefSlow(one), 0, forward);
  TORCH_CHECK(r.has_value(), "torch_webgpu: FFT of length ", x.size(dim), " along dim ", dim,
              " could not run on the device");
  return *r;
}

// The unnormalised transform of complex `x` along `dim`, whose signals are too long for
// one pass; nullopt when the length has no four-step split.
std::optional<Tensor> four_step_c2c(const Tensor& x, int64_t dim, bool forward) {
  const int64_t n = x.size(dim);
  auto split = four_step_split(n);
  if (!split) return std::nullopt;
  const auto [n1, n2] = *split;
  Tensor m = x.movedim(dim, -1);
  auto lead = m.sizes().vec();
  lead.pop_back();
  const int64_t signals = m.numel() / n;
  Tensor columns = c2c_along(m.reshape({signals, n1, n2}), 1, forward);
  columns.mul_(four_step_twiddles(n1, n2, n, forward, x));
  Tensor rows = c2c_along(columns, 2, forward);
  lead.push_back(n);
  return rows.transpose(1, 2).reshape(lead).movedim(-1, dim);
}

Tensor scaled(Tensor t, float scale) { return scale == 1.0f ? t : t.mul_(scale); }

// ---- output layout ---------------------------------------------------------------------
// The kernels write contiguous results; the CPU (MKL / pocketfft) and the meta functions
// torch.compile checks extern kernel outputs against lay them out as ATen's _exec_fft does:
// batch dims first (by the input's strides, largest first), then the transformed dims in
// the order transformed, contiguous in that order. Without MKL, the meta functions give
// r2c and c2r (not c2c) outputs of a non-CPU device contiguous.

// Dims sorted by stride, largest first (stable: ties keep their order).
std::vector<int64_t> by_stride(std::vector<int64_t> dims, at::IntArrayRef strides) {
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return dims;
}

// The strides _exec_fft gives an output of `sizes` transforming `dims` of an input of `strides`.
std::vector<int64_t> exec_fft_strides(at::IntArrayRef strides, at::IntArrayRef sizes,
                                      const std::vector<int64_t>& dims) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> batch;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) batch.push_back(d);
  batch = by_stride(batch, strides);
  std::vector<int64_t> out(ndim);
  int64_t step = 1;  // contiguous over (batch, dims...): the signal dims innermost, last fastest
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    out[*d] = step;
    step *= std::max<int64_t>(sizes[*d], 1);
  }
  for (auto d = batch.rbegin(); d != batch.rend(); ++d) {
    out[*d] = step;
    step *= sizes[*d];
  }
  return out;
}

// `value` in the given strides: a copy unless they are its own.
Tensor with_strides(const Tensor& value, const std::vector<int64_t>& strides) {
  if (value.strides() == at::IntArrayRef(strides)) return value;
  Tensor out = at::empty_strided(value.sizes(), strides, value.options());
  out.copy_(value);
  return out;
}

// ---- _fft_r2c ---------------------------------------------------------------------------

std::optional<Tensor> r2c_native(const Tensor& self, at::IntArrayRef dim, int64_t normalization,
                                 bool onesided) {
  if (!on_device(self) || self.scalar_type() != c10::kFloat || normalization < 0 ||
      normalization > 2)
    return std::nullopt;
  auto dims = wrapped_dims(dim, self.dim());
  if (!dims || !dims_nonempty(self, *dims)) return std::nullopt;
  if (auto r = over_batch_pieces(self, *dims, [&](const Tensor& p, const std::vector<int64_t>& d) {
        return *r2c_native(p, d, normalization, onesided);
      }))
    return r;
  const int64_t last = dims->back();
  const int64_t n = self.size(last);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  if (onesided) sizes[last] = n / 2 + 1;
  double total = 1;
  for (int64_t d : *dims) total *= static_cast<double>(self.size(d));
  const float scale = norm_scale(normalization, total);
  if (exceeds_one_pass(self.numel())) {
    // Too large for one pass even alone: the last dim as a complex transform of its own
    // (four-step when one signal is too long), then the others one at a time.
    std::optional<Tensor> y;
    if (dims->size() > 1) y = r2c_native(self, {last}, 0, onesided);
    else if ((y = four_step_c2c(at::complex(self, at::zeros_like(self)), last, true)) && onesided)
      y = y->narrow(last, 0, n / 2 + 1).contiguous();
    if (y) {
      for (size_t k = 0; k + 1 < dims->size(); ++k) y = c2c_along(*y, (*dims)[k], true);
      return scaled(*y, scale);
    }
  }
  Tensor out = complex_like(self, sizes);
  if (out.numel() == 0) return out;
  const bool single = dims->size() == 1;
  transform_axis(self.contiguous(), FftInput::Real, out, FftOutput::Complex, last, n, false,
                 single ? scale : 1.0f);
  std::vector<int64_t> rest(dims->begin(), dims->end() - 1);
  return c2c_dims(out, rest, false, scale);
}

Tensor fft_r2c(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  if (auto r = r2c_native(self, dim, normalization, onesided)) {
    if (!at::globalContext().hasMKL()) return *r;
    auto dims = *wrapped_dims(dim, self.dim());  // sorted by stride but for the last (r2c's)
    std::vector<int64_t> sorted = by_stride({dims.begin(), dims.end() - 1}, self.strides());
    sorted.push_back(dims.back());
    return with_strides(*r, exec_fft_strides(self.strides(), r->sizes(), sorted));
  }
  return call_cpu_fallback<at::_ops::_fft_r2c>(self, dim, normalization, onesided);
}

void store(Tensor& out, const Tensor& value) {
  at::native::resize_output(out, value.sizes());
  out.copy_(value);
}

Tensor& fft_r2c_out(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided,
                    Tensor& out) {
  if (on_device(out) && out.scalar_type() == c10::kComplexFloat)
    if (auto r = r2c_native(self, dim, normalization, onesided)) {
    if (!at::globalContext().hasMKL()) return *r;
      store(out, *r);
      return out;
    }
  return call_cpu_fallback<at::_ops::_fft_r2c_out>(self, dim, normalization, onesided, out);
}

// ---- _fft_c2c ---------------------------------------------------------------------------

std::optional<Tensor> c2c_native(const Tensor& self, c10::SymIntArrayRef dim, int64_t normalization,
                                 bool forward) {
  if (!on_device(self) || self.scalar_type() != c10::kComplexFloat || normalization < 0 ||
      normalization > 2)
    return std::nullopt;
  std::vector<int64_t> raw;
  for (const c10::SymInt& d : dim) {
    auto v = d.maybe_as_int();
    if (!v) return std::nullopt;
    raw.push_back(*v);
  }
  auto dims = wrapped_dims(raw, self.dim());
  if (!dims) return std::nullopt;
  if (self.numel() == 0 || dims->empty()) return self.clone(at::MemoryFormat::Contiguous);
  if (!dims_nonempty(self, *dims)) return std::nullopt;
  if (auto r = over_batch_pieces(self, *dims, [&](const Tensor& p, const std::vector<int64_t>& d) {
        return *c2c_native(p, c10::fromIntArrayRefSlow(d), normalization, forward);
      }))
    return r;
  double total = 1;
  for (int64_t d : *dims) total *= static_cast<double>(self.size(d));
  const float scale = norm_scale(normalization, total);
  if (exceeds_one_pass(self.numel())) {
    // Too large for one pass even alone: one dim at a time, four-step for a long one.
    std::optional<Tensor> y = self;
    if (dims->size() == 1) y = four_step_c2c(self, dims->front(), forward);
    else
      for (int64_t d : *dims) y = c2c_along(*y, d, forward);
    if (y) return scaled(*y, scale);
  }
  return c2c_dims(self.contiguous(), *dims, !forward, scale);
}

// The layout of a c2c over `dims` of a tensor of `strides`.
std::vector<int64_t> c2c_strides(at::IntArrayRef strides, at::IntArrayRef sizes,
                                 const std::vector<int64_t>& dims) {
  return exec_fft_strides(strides, sizes, by_stride(dims, strides));
}

Tensor fft_c2c(const Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward) {
  if (auto r = c2c_native(self, dim, normalization, forward)) {
    auto dims = *wrapped_dims(C10_AS_INTARRAYREF_SLOW(dim), self.dim());
    if (dims.empty() || self.numel() == 0) return *r;
    return with_strides(*r, c2c_strides(self.strides(), r->sizes(), dims));
  }
  return call_cpu_fallback_symint<at::_ops::_fft_c2c>(self, dim, normalization, forward);
}

Tensor& fft_c2c_out(const Tensor& self, c10::SymIntArrayRef dim, int64_t normalization,
                    bool forward, Tensor& out) {
  if (on_device(out) && out.scalar_type() == c10::kComplexFloat)
    if (auto r = c2c_native(self, dim, normalization, forward)) {
      store(out, *r);
      return out;
    }
  return call_cpu_fallback_symint<at::_ops::_fft_c2c_out>(self, dim, normalization, forward, out);
}

// ---- _fft_c2r ---------------------------------------------------------------------------

std::optional<Tensor> c2r_native(const Tensor& self, at::IntArrayRef dim, int64_t normalization,
                                 const c10::SymInt& last_dim_size) {
  if (!on_device(self) || self.scalar_type() != c10::kComplexFloat || normalization < 0 ||
      normalization > 2)
    return std::nullopt;
  auto n_opt = last_dim_size.maybe_as_int();
  auto dims = wrapped_dims(dim, self.dim());
  if (!n_opt || !dims || dims->empty()) return std::nullopt;
  const int64_t n = *n_opt, last = dims->back();
  // The CPU accepts the onesided (n/2 + 1) or the full (n) input length only.
  if (n < 1 || !length_fits(n) || (self.size(last) != n / 2 + 1 && self.size(last) != n))
    return std::nullopt;
  std::vector<int64_t> rest(dims->begin(), dims->end() - 1);
  for (int64_t d : rest)
    if (self.size(d) == 0 || !length_fits(self.size(d))) return std::nullopt;
  if (auto r = over_batch_pieces(self, *dims, [&](const Tensor& p, const std::vector<int64_t>& d) {
        return *c2r_native(p, d, normalization, last_dim_size);
      }))
    return r;
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes[last] = n;
  Tensor out = at::empty(sizes, self.options().dtype(c10::kFloat));
  if (out.numel() == 0) return out;
  double total = static_cast<double>(n);
  for (int64_t d : rest) total *= static_cast<double>(self.size(d));
  if (exceeds_one_pass(out.numel()) || exceeds_one_pass(self.numel())) {
    // Too large for one pass even alone: the other dims first (inverse c2c), then the
    // last as a complex transform of the whole Hermitian spectrum, four-step if long.
    Tensor x = self;
    for (int64_t d : rest) x = c2c_along(x, d, false);
    std::optional<Tensor> y;
    if (!rest.empty()) {
      y = c2r_native(x, {last}, 0, last_dim_size);
    } else {
      const int64_t half = n / 2 + 1;
      Tensor head = x.narrow(last, 0, half);
      Tensor mirrored = at::conj_physical(head.narrow(last, 1, n - half).flip({last}));
      if ((y = four_step_c2c(at::cat({head, mirrored}, last), last, false)))
        y = at::real(*y).contiguous();
    }
    if (y) return scaled(*y, norm_scale(normalization, total));
  }
  Tensor x = c2c_dims(self.contiguous(), rest, true, 1.0f);
  transform_axis(x, FftInput::Hermitian, out, FftOutput::Real, last, n, true,
                 norm_scale(normalization, total));
  return out;
}

Tensor fft_c2r(const Tensor& self, at::IntArrayRef dim, int64_t normalization,
               c10::SymInt last_dim_size) {
  if (auto r = c2r_native(self, dim, normalization, last_dim_size)) {
    if (!at::globalContext().hasMKL()) return *r;
    // The c2c over the other dims first, then the c2r over the last from its layout.
    auto dims = *wrapped_dims(dim, self.dim());
    std::vector<int64_t> rest(dims.begin(), dims.end() - 1);
    std::vector<int64_t> strides(self.strides().begin(), self.strides().end());
    if (!rest.empty()) strides = c2c_strides(self.strides(), self.sizes(), rest);
    return with_strides(*r, exec_fft_strides(strides, r->sizes(), {dims.back()}));
  }
  return call_cpu_fallback_symint<at::_ops::_fft_c2r>(self, dim, normalization, last_dim_size);
}

Tensor& fft_c2r_out(const Tensor& self, at::IntArrayRef dim, int64_t normalization,
                    c10::SymInt last_dim_size, Tensor& out) {
  if (on_device(out) && out.scalar_type() == c10::kFloat)
    if (auto r = c2r_native(self, dim, normalization, last_dim_size)) {
    if (!at::globalContext().hasMKL()) return *r;
      store(out, *r);
      return out;
    }
  return call_cpu_fallback_symint<at::_ops::_fft_c2r_out>(self, dim, normalization, last_dim_size, out);
}

// ---- conj_physical, complex, polar -----------------------------------------------------
// Elementwise kernels (any strides, broadcasting) computing in complex64.

Tensor& conj_physical_into(const Tensor& self, Tensor& out) {
  if (!on_device(self) || !on_device(out) || out.scalar_type() != self.scalar_type() ||
      self.scalar_type() == c10::kComplexDouble || self.is_conj() || self.is_neg())
    return call_cpu_fallback<at::_ops::conj_physical_out>(self, out);
  if (self.scalar_type() != c10::kComplexFloat) {  // real: conj is the identity
    if (!self.is_same(out)) store(out, self);
    return out;
  }
  auto iter = at::TensorIterator::unary_op(out, self);
  launch_on_iterator(iter, "conj", Compute::C64);
  return out;
}

// In place (its composite kernel calls a CPU-only stub): the out= path.
Tensor& conj_physical_inplace(Tensor& self) {
  if (!on_device(self) || self.scalar_type() != c10::kComplexFloat || self.is_conj() ||
      self.is_neg())
    return call_cpu_fallback<at::_ops::conj_physical_>(self);
  return conj_physical_into(self, self);
}

// complex(a, b) and polar(a, b) of float32 parts into a complex64 out; false otherwise.
bool from_parts(const Tensor& a, const Tensor& b, Tensor& out, const char* kernel) {
  if (!on_device(a) || !on_device(b) || !on_device(out) || a.scalar_type() != c10::kFloat ||
      b.scalar_type() != c10::kFloat || out.scalar_type() != c10::kComplexFloat)
    return false;
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build();
  launch_on_iterator(iter, kernel, Compute::C64);
  return true;
}

Tensor& complex_out(const Tensor& real, const Tensor& imag, Tensor& out) {
  if (from_parts(real, imag, out, "complex_cartesian")) return out;
  return call_cpu_fallback<at::_ops::complex_out>(real, imag, out);
}

Tensor& polar_out(const Tensor& abs, const Tensor& angle, Tensor& out) {
  if (from_parts(abs, angle, out, "complex_polar")) return out;
  return call_cpu_fallback<at::_ops::polar_out>(abs, angle, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_r2c", TORCH_FN(fft_r2c));
  m.impl("_fft_r2c.out", TORCH_FN(fft_r2c_out));
  m.impl("_fft_c2c", TORCH_FN(fft_c2c));
  m.impl("_fft_c2c.out", TORCH_FN(fft_c2c_out));
  m.impl("_fft_c2r", TORCH_FN(fft_c2r));
  m.impl("_fft_c2r.out", TORCH_FN(fft_c2r_out));
  m.impl("conj_physical.out", TORCH_FN(conj_physical_into));
  m.impl("conj_physical_", TORCH_FN(conj_physical_inplace));
  m.impl("complex.out", TORCH_FN(complex_out));
  m.impl("polar.out", TORCH_FN(polar_out));
}

}  // namespace twgpu::aten
