// Native random ops: distribution fills (uniform_, normal_, bernoulli_, random_, ...),
// normal with tensor parameters, randperm, multinomial and dropout, all drawing from the
// generator's Philox stream (kernels/random.h). ATen's own templates
// (DistributionTemplates.h) do the argument checks, so errors match the CPU's; they call
// the kernel functors below. rand/randn/randint(_like) are composites over these.
// randperm sorts 64-bit random keys with a bitonic network on the device (ties, about
// n^2 / 2^65 likely, keep index order); multinomial without replacement (and with one
// sample, as the CPU) takes the largest p / Exp(1) keys; with replacement it searches the
// running sums. Validation that needs the data (multinomial's probabilities, normal's
// std >= 0) is computed on the device and read back as one flag; bernoulli's p in [0, 1]
// goes through the device error word (raised at the next read-back, as CUDA's assert).
//
// Numbers are reproducible on this device for a seed, but they are not the CPU's stream.
// float64 (and complex) targets go to the CPU fallback, which draws from the generator's
// CPU twin.
#include <ATen/native/DistributionTemplates.h>
#include <ATen/ops/bernoulli_ops.h>
#include <ATen/ops/cauchy_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/exponential_ops.h>
#include <ATen/ops/geometric_ops.h>
#include <ATen/ops/log_normal_ops.h>
#include <ATen/ops/multinomial_ops.h>
#include <ATen/ops/native_dropout_backward_ops.h>
#include <ATen/ops/native_dropout_ops.h>
#include <ATen/ops/normal_ops.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/random_ops.h>
#include <ATen/ops/rrelu_with_noise_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/randperm_ops.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/uniform_ops.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "aten/cpu_fallback.h"
#include "aten/generator.h"
#include "aten/webgpu_tensor.h"
#include "kernels/random.h"

namespace twgpu::aten {
namespace {

using at::Tensor;
using Gen = std::optional<at::Generator>;

rng::BufferRef buffer_ref(const Tensor& t) {
  DeviceRef r = device_ref(t);
  return {r.buffer, r.offset, r.dtype};
}

rng::PhiloxInput reserve(const Gen& gen, uint64_t blocks) {
  auto [seed, offset] = philox_reserve(gen, blocks);
  return {seed, offset};
}

bool native_float(const Tensor& t) {
  return is_native_compute(t.scalar_type()) && at::isFloatingType(t.scalar_type());
}

// Runs a fill over `self`. Tensors whose elements form one dense block (any dense
// permutation) are filled in memory order (the draws are independent, so order does
// not matter); others are filled through a contiguous temporary.
void fill(const Tensor& self, const rng::FillParams& params, const Gen& gen) {
  const uint64_t n = static_cast<uint64_t>(self.numel());
  if (n == 0) return;
  at::assert_no_internal_overlap(self);
  const bool direct = params.dist == rng::Dist::BernoulliTensor ? self.is_contiguous()
                                                                  : self.is_non_overlapping_and_dense();
  Tensor target = direct ? self : at::empty(self.sizes(), self.options());
  rng::PhiloxInput philox = reserve(gen, rng::fill_blocks(params.dist, n));
  TWGPU_TRY
  RuntimeLock lock;
  rng::fill_random(lock.ctx(), buffer_ref(target), n, params, philox);
  TWGPU_CATCH
  if (!direct) self.copy_(target);
}

// Half the dtype's machine epsilon: the cap on log(u) for exponential draws near u = 1.
float half_epsilon(c10::ScalarType t) {
  switch (t) {
    case c10::kHalf: return 0.00048828125f;
    case c10::kBFloat16: return 0.00390625f;
    default: return std::numeric_limits<float>::epsilon() / 2;
  }
}

// ---- kernel functors for ATen's templates (RNG is unused) -------------------------------

template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::Uniform;
    p.a = static_cast<float>(from);
    p.b = static_cast<float>(to);
    fill(iter.tensor(0), p, gen);
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const Tensor& self, double mean, double std, Gen gen) {
    if (!native_float(self)) {
      Tensor s = self;
      call_cpu_fallback<at::_ops::normal_>(s, mean, std, gen);
      return;
    }
    rng::FillParams p;
    p.dist = rng::Dist::Normal;
    p.a = static_cast<float>(mean);
    p.b = static_cast<float>(std);
    fill(self, p, gen);
  }
};

template <typename RNG>
struct LogNormalKernel {
  void operator()(at::TensorIteratorBase& iter, double mean, double std, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::LogNormal;
    p.a = static_cast<float>(mean);
    p.b = static_cast<float>(std);
    fill(iter.tensor(0), p, gen);
  }
};

template <typename RNG>
struct CauchyKernel {
  void operator()(at::TensorIteratorBase& iter, double median, double sigma, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::Cauchy;
    p.a = static_cast<float>(median);
    p.b = static_cast<float>(sigma);
    fill(iter.tensor(0), p, gen);
  }
};

template <typename RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::Exponential;
    p.a = static_cast<float>(lambda);
    p.b = half_epsilon(iter.dtype(0));
    fill(iter.tensor(0), p, gen);
  }
};

template <typename RNG>
struct GeometricKernel {
  void operator()(at::TensorIteratorBase& iter, double prob, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::Geometric;
    p.a = static_cast<float>(std::log1p(-prob));
    fill(iter.tensor(0), p, gen);
  }
};

template <typename RNG>
struct BernoulliScalarKernel {
  void operator()(const Tensor& self, double prob, Gen gen) {
    rng::FillParams p;
    p.dist = rng::Dist::Bernoulli;
    p.a = static_cast<float>(prob);
    fill(self, p, gen);
  }
};

template <typename RNG>
struct BernoulliTensorKernel {
  void operator()(const Tensor& self, const Tensor& p_in, Gen gen) {
    Tensor p_dev = p_in.to(self.device());
    TORCH_CHECK(at::isFloatingType(p_dev.scalar_type()),
                "expected probabilities tensor to have floating type, got ", p_dev.scalar_type());
    if (!is_native_compute(p_dev.scalar_type())) p_dev = p_dev.to(at::kFloat);
    Tensor probs = p_dev.expand(self.sizes()).contiguous();
    rng::FillParams p;
    p.dist = rng::Dist::BernoulliTensor;
    p.p = buffer_ref(probs);
    // Probabilities outside [0, 1] raise at the next read-back (the CPU's message), as
    // CUDA's device-side assert does: no host round trip per call, and graphs capture it.
    TWGPU_TRY
    RuntimeLock lock;
    p.check_code = lock.ctx().checks().code_for(
        "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message "
        "be improved?  If so, please report an enhancement request to PyTorch.)");
    TWGPU_CATCH
    fill(self, p, gen);
  }
};

// Integers in [base, base + range); range == 0 means the full 64-bit range.
void fill_range(const Tensor& self, uint64_t range, int64_t base, Gen gen) {
  rng::FillParams p;
  p.dist = range == 0 ? rng::Dist::RandomFull64 : rng::Dist::RandomRange;
  p.range = range;
  p.base = base;
  fill(self, p, gen);
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, Gen gen) {
    fill_range(iter.tensor(0), range, base, gen);
  }
  void operator()(at::TensorIteratorBase& iter, Gen gen) { fill_range(iter.tensor(0), 0, 0, gen); }
};

// random_() without bounds: [0, 2^mantissa] for floats, [0, max] for integers, as the CPU.
template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, Gen gen) {
    uint64_t range = 0;
    switch (iter.dtype(0)) {
      case c10::kFloat: range = (1ull << 24) + 1; break;
      case c10::kHalf: range = (1ull << 11) + 1; break;
      case c10::kBFloat16: range = (1ull << 8) + 1; break;
      case c10::kLong: range = 1ull << 63; break;
      case c10::kInt: range = 1ull << 31; break;
      case c10::kShort: range = 1ull << 15; break;
      case c10::kChar: range = 1ull << 7; break;
      case c10::kByte: range = 1ull << 8; break;
      case c10::kBool: range = 2; break;
      default: TORCH_CHECK(false, "random_ not implemented for ", iter.dtype(0));
    }
    fill_range(iter.tensor(0), range, 0, gen);
  }
};

// ---- registered ops ---------------------------------------------------------------------

Tensor& uniform_(Tensor& self, double from, double to, Gen gen) {
  if (!native_float(self)) return call_cpu_fallback<at::_ops::uniform_>(self, from, to, gen);
  return at::native::templates::uniform_impl_<UniformKernel, void*>(self, from, to, gen);
}

Tensor& normal_(Tensor& self, double mean, double std, Gen gen) {
  if (!native_float(self)) return call_cpu_fallback<at::_ops::normal_>(self, mean, std, gen);
  return at::native::templates::normal_impl_<NormalKernel, void*>(self, mean, std, gen);
}

// normal with tensor parameters, as ATen's templates (including their quirks: the
// Tensor_float out= variant broadcasts mean against the out tensor's current shape), but
// checking std >= 0 on the device instead of through a min reduction.
void check_std_tensor(const Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  if (std.numel() == 0) return;
  if (!native_float(std)) {
    TORCH_CHECK(std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
    return;
  }
  Tensor values = std.contiguous();
  Tensor flag = at::zeros({1}, std.options().dtype(at::kInt));
  TWGPU_TRY
  RuntimeLock lock;
  rng::flag_negative_or_nan(lock.ctx(), buffer_ref(values), static_cast<uint64_t>(values.numel()),
                            device_ref(flag).buffer);
  TWGPU_CATCH
  TORCH_CHECK(flag.cpu().item<int32_t>() == 0, "normal expects all elements of std >= 0.0");
}

void standard_normal(Tensor& output, Gen gen) {
  at::native::templates::normal_impl_<NormalKernel, void*>(output, 0, 1, gen);
}

Tensor& normal_tensor_float_out(const Tensor& mean, double std, Gen gen, Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::native::resize_output(out, at::infer_size(mean.sizes(), out.sizes()));
  at::native::templates::normal_impl_<NormalKernel, void*>(out, 0, std, gen);
  out.add_(mean);
  return out;
}
Tensor normal_tensor_float(const Tensor& mean, double std, Gen gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  Tensor out = at::empty_like(mean, c10::MemoryFormat::Contiguous);
  return normal_tensor_float_out(mean, std, gen, out);
}
Tensor& normal_float_tensor_out(double mean, const Tensor& std, Gen gen, Tensor& out) {
  check_std_tensor(std);
  at::native::resize_output(out, std.sizes());
  standard_normal(out, gen);
  out.mul_(std).add_(mean);
  return out;
}
Tensor normal_float_tensor(double mean, const Tensor& std, Gen gen) {
  check_std_tensor(std);
  Tensor out = at::empty_like(std, c10::MemoryFormat::Contiguous);
  return normal_float_tensor_out(mean, std, gen, out);
}
Tensor& normal_tensor_tensor_out(const Tensor& mean, const Tensor& std, Gen gen, Tensor& out) {
  check_std_tensor(std);
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  standard_normal(out, gen);
  out.mul_(std).add_(mean);
  return out;
}
Tensor normal_tensor_tensor(const Tensor& mean, const Tensor& std, Gen gen) {
  check_std_tensor(std);
  Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options(),
                         c10::MemoryFormat::Contiguous);
  return normal_tensor_tensor_out(mean, std, gen, out);
}

Tensor& log_normal_(Tensor& self, double mean, double std, Gen gen) {
  if (!native_float(self)) return call_cpu_fallback<at::_ops::log_normal_>(self, mean, std, gen);
  return at::native::templates::log_normal_impl_<LogNormalKernel, void*>(self, mean, std, gen);
}

Tensor& cauchy_(Tensor& self, double median, double sigma, Gen gen) {
  if (!native_float(self)) return call_cpu_fallback<at::_ops::cauchy_>(self, median, sigma, gen);
  return at::native::templates::cauchy_impl_<CauchyKernel, void*>(self, median, sigma, gen);
}

Tensor& exponential_(Tensor& self, double lambda, Gen gen) {
  if (!native_float(self)) return call_cpu_fallback<at::_ops::exponential_>(self, lambda, gen);
  return at::native::templates::exponential_impl_<ExponentialKernel, void*>(self, lambda, gen);
}

Tensor& geometric_(Tensor& self, double p, Gen gen) {
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::geometric_>(self, p, gen);
  return at::native::templates::geometric_impl_<GeometricKernel, void*>(self, p, gen);
}

Tensor& bernoulli_float_(Tensor& self, double p, Gen gen) {
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::bernoulli__float>(self, p, gen);
  return at::native::templates::bernoulli_impl_<BernoulliScalarKernel, void*>(self, p, gen);
}

Tensor& bernoulli_tensor_(Tensor& self, const Tensor& p, Gen gen) {
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::bernoulli__Tensor>(self, p, gen);
  return at::native::templates::bernoulli_impl_<BernoulliTensorKernel, void*>(self, p, gen);
}

Tensor& bernoulli_out(const Tensor& self, Gen gen, Tensor& out) {
  if (!is_native_compute(out.scalar_type()) || !is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::bernoulli_out>(self, gen, out);
  return at::native::templates::bernoulli_out_impl<BernoulliTensorKernel, void*>(out, self, gen);
}

Tensor& random_(Tensor& self, Gen gen) {
  if (!is_native_compute(self.scalar_type())) return call_cpu_fallback<at::_ops::random_>(self, gen);
  return at::native::templates::random_impl<RandomKernel, void*>(self, gen);
}

Tensor& random_from_(Tensor& self, int64_t from, std::optional<int64_t> to, Gen gen) {
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::random__from>(self, from, to, gen);
  return at::native::templates::random_from_to_impl<RandomFromToKernel, void*>(self, from, to, gen);
}

Tensor& random_to_(Tensor& self, int64_t to, Gen gen) {
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::random__to>(self, to, gen);
  return at::native::templates::random_from_to_impl<RandomFromToKernel, void*>(self, 0, to, gen);
}

// ---- randperm ------------------------------------------------------------------------

Tensor& randperm_out(int64_t n, Gen gen, Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(!gen.has_value() || out.device() == gen->device(), "Expected a '", out.device(),
              "' generator device but found '", gen.has_value() ? gen->device() : out.device(), "'");
  // The CPU's limits: the largest value must fit the dtype (exactly for floats).
  TORCH_CHECK(at::scalar_tensor(n > 0 ? n - 1 : n, out.options().device(at::kCPU)).defined(),
              "n is too large for result tensor type: '", out.toString(), "'");
  if (out.scalar_type() == c10::kHalf)
    TORCH_CHECK(n <= (int64_t(1) << 11) + 1, "n cannot be greater than 2049 for Half type.");
  if (out.scalar_type() == c10::kFloat)
    TORCH_CHECK(n <= (int64_t(1) << 24) + 1, "n cannot be greater than 2^24+1 for Float type.");
  if (!is_native_compute(out.scalar_type()) || n >= (int64_t(1) << 31))
    return call_cpu_fallback<at::_ops::randperm_generator_out>(n, gen, out);
  out.resize_({n});
  if (n == 0) return out;
  Tensor target = out.is_contiguous() ? out : at::empty({n}, out.options());
  const uint64_t words = rng::permutation_scratch_words(static_cast<uint64_t>(n));
  Tensor scratch = at::empty({static_cast<int64_t>(words)}, out.options().dtype(at::kInt));
  rng::PhiloxInput philox = reserve(gen, static_cast<uint64_t>(n));
  TWGPU_TRY
  RuntimeLock lock;
  rng::random_permutation(lock.ctx(), buffer_ref(target), static_cast<uint64_t>(n),
                          device_ref(scratch).buffer, philox);
  TWGPU_CATCH
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

// ---- multinomial ---------------------------------------------------------------------

Tensor& multinomial_out(const Tensor& self, int64_t n_sample, bool replacement, Gen gen,
                        Tensor& result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == c10::kLong, "multinomial expects Long tensor out, got: ",
              result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
  if (!is_native_compute(self.scalar_type()))
    return call_cpu_fallback<at::_ops::multinomial_out>(self, n_sample, replacement, gen, result);
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  if (self.dim() == 1) result.resize_({n_sample});
  else result.resize_({rows, n_sample});
  if (result.numel() == 0) return result;
  TORCH_CHECK(cats > 0, "invalid multinomial distribution (sum of probabilities <= 0)");

  // CPU and CUDA take the exponential-race path for one sample, and without replacement.
  const bool race = !replacement || n_sample == 1;
  Tensor probs = self.contiguous();
  Tensor stats = at::empty({rows * 2}, self.options().dtype(at::kInt));
  Tensor scratch = at::empty({rows * cats}, self.options().dtype(at::kFloat));
  Tensor target = result.is_contiguous() ? result : at::empty(result.sizes(), result.options());
  TWGPU_TRY
  RuntimeLock lock;
  rng::multinomial_prepare(lock.ctx(), buffer_ref(probs), rows, cats, device_ref(stats).buffer,
                           race ? nullptr : device_ref(scratch).buffer);
  TWGPU_CATCH
  // The CPU validates the probabilities before sampling; so do we (one small read).
  Tensor host = stats.cpu();
  const int32_t* s = host.const_data_ptr<int32_t>();
  int32_t flags = 0;
  for (int64_t r = 0; r < rows; ++r) flags |= s[2 * r + 1];
  if (race) {
    TORCH_CHECK(!(flags & 3), "probability tensor contains either `inf`, `nan` or element < 0");
    TORCH_CHECK(!(flags & 4), "invalid multinomial distribution (sum of probabilities <= 0)");
  } else {
    TORCH_CHECK(!(flags & 1), "invalid multinomial distribution (encountering probability entry < 0)");
    TORCH_CHECK(!(flags & 2),
                "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
    TORCH_CHECK(!(flags & 4), "invalid multinomial distribution (sum of probabilities <= 0)");
  }
  const uint64_t blocks = static_cast<uint64_t>(race ? rows * cats : rows * n_sample);
  rng::PhiloxInput philox = reserve(gen, blocks);
  TWGPU_TRY
  RuntimeLock lock;
  if (race)
    rng::multinomial_without_replacement(lock.ctx(), buffer_ref(probs), device_ref(scratch).buffer,
                                         rows, cats, n_sample, buffer_ref(target), philox);
  else
    rng::multinomial_with_replacement(lock.ctx(), buffer_ref(probs), device_ref(scratch).buffer,
                                      rows, cats, n_sample, buffer_ref(target), philox);
  TWGPU_CATCH
  if (!target.is_same(result)) result.copy_(target);
  return result;
}

Tensor multinomial(const Tensor& self, int64_t n_sample, bool replacement, Gen gen) {
  Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  multinomial_out(self, n_sample, replacement, gen, result);
  return result;
}

// ---- dropout -------------------------------------------------------------------------

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, std::optional<bool> train) {
  if (!is_native_compute(input.scalar_type()))
    return call_cpu_fallback<at::_ops::native_dropout>(input, p, train);
  // As the CPU kernel: an empty input is returned as is, with a mask of its dtype.
  if (input.numel() == 0) return std::make_tuple(input, at::empty_like(input, input.options()));
  if (train.has_value() && !*train)
    return std::make_tuple(input.clone(), at::ones_like(input, input.options().dtype(at::kBool)));
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;
  if (!at::isFloatingType(input.scalar_type())) {  // as the CPU: bernoulli mask, then muls
    Tensor mask = at::empty_like(input, input.options().dtype(at::kBool),
                                 c10::MemoryFormat::Contiguous);
    bernoulli_float_(mask, keep, std::nullopt);
    return std::make_tuple(input.mul(mask).mul_(scale), mask);
  }
  // One fused pass in memory order; a dense input keeps its layout.
  const bool dense = input.is_non_overlapping_and_dense();
  Tensor x = dense ? input : input.contiguous();
  Tensor output = at::empty_like(x);
  Tensor mask = at::empty_like(x, x.options().dtype(at::kBool));
  const uint64_t n = static_cast<uint64_t>(x.numel());
  rng::PhiloxInput philox = reserve(std::nullopt, rng::fill_blocks(rng::Dist::Bernoulli, n));
  TWGPU_TRY
  RuntimeLock lock;
  rng::dropout_forward(lock.ctx(), buffer_ref(x), buffer_ref(output), buffer_ref(mask), n,
                       static_cast<float>(keep), static_cast<float>(scale), philox);
  TWGPU_CATCH
  return std::make_tuple(output, mask);
}

Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return grad.mul(mask).mul(scale);
}

// ---- rrelu_with_noise ----------------------------------------------------------------

// Training: negative inputs are scaled by a slope drawn from U(lower, upper), recorded in
// `noise` (1 for the others); evaluation: leaky_relu with the mean slope, as the CPU.
Tensor& rrelu_with_noise_out(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                             const c10::Scalar& upper, bool training, Gen gen, Tensor& output) {
  TORCH_CHECK(self.sym_sizes() == noise.sym_sizes(),
              "noise tensor shape must match self tensor shape. Got self.shape = ", self.sym_sizes(),
              " noise.shape = ", noise.sym_sizes());
  if (!native_float(self) || !native_float(noise) || !native_float(output))
    return call_cpu_fallback<at::_ops::rrelu_with_noise_out>(self, noise, lower, upper, training,
                                                              gen, output);
  if (!training) return at::leaky_relu_out(output, self, (lower.toDouble() + upper.toDouble()) / 2);
  // The slopes stay in float32 (the CPU's opmath) until the product is rounded.
  Tensor slope = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  rng::FillParams p;
  p.dist = rng::Dist::Uniform;
  p.a = static_cast<float>(lower.toDouble());
  p.b = static_cast<float>(upper.toDouble());
  fill(slope, p, gen);
  Tensor negative = self.le(0);
  Tensor result = at::where(negative, self.mul(slope), self).to(self.scalar_type());
  noise.copy_(at::where(negative, slope, 1.0));
  at::native::resize_output(output, self.sizes());
  output.copy_(result);
  return output;
}

Tensor rrelu_with_noise(const Tensor& self, Tensor& noise, const c10::Scalar& lower,
                        const c10::Scalar& upper, bool training, Gen gen) {
  Tensor output = at::empty_like(self, c10::MemoryFormat::Contiguous);
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, output);
}

Tensor& rrelu_with_noise_(Tensor& self, Tensor& noise, const c10::Scalar& lower,
                          const c10::Scalar& upper, bool training, Gen gen) {
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor_));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("random_", TORCH_FN(random_));
  m.impl("random_.from", TORCH_FN(random_from_));
  m.impl("random_.to", TORCH_FN(random_to_));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
  m.impl("rrelu_with_noise", TORCH_FN(rrelu_with_noise));
  m.impl("rrelu_with_noise_", TORCH_FN(rrelu_with_noise_));
  m.impl("rrelu_with_noise.out", TORCH_FN(rrelu_with_noise_out));
}

}  // namespace
}  // namespace twgpu::aten
