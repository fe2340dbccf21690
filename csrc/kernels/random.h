// Random number kernels: a counter-based generator (Philox-4x32-10) in WGSL and the
// kernels built on it (distribution fills, random permutations, multinomial sampling).
//
// Every kernel takes a Philox key (the generator's seed) and a 64-bit counter base (the
// generator's offset). Invocation i draws the 128-bit block Philox(key, base + i), so a
// kernel over n blocks consumes the counter range [base, base + n): the caller advances
// the generator's offset by the returned block count. Same key and base -> same numbers.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>
#include <string>

#include "kernels/dtype.h"

namespace twgpu {

class Context;

namespace rng {

struct PhiloxInput {
  uint64_t seed = 0;    // the key
  uint64_t offset = 0;  // first counter of the range the kernel consumes
};

// A tensor as kernels see it: buffer, element offset, dtype.
struct BufferRef {
  WGPUBuffer buffer = nullptr;
  uint64_t offset = 0;  // elements
  DType dtype = DType::Float32;
};

enum class Dist : uint8_t {
  Uniform,          // a in [a, b); values that round to b are replaced by a
  Normal,           // a + b * N(0, 1)
  LogNormal,        // exp(a + b * N(0, 1))
  Cauchy,           // a + b * tan(pi (u - 1/2))
  Exponential,      // -log(u) / a, u in (0, 1]; log(u) capped at -b (b: half the dtype's epsilon)
  Geometric,        // ceil(log(u) / a), a = log1p(-p), u in (0, 1)
  Bernoulli,        // u < a
  BernoulliTensor,  // u < p[i] (p: a contiguous float tensor of the output's numel)
  RandomRange,      // base + (random 64-bit value mod range); range < 2^64
  RandomFull64,     // the raw 64-bit value (the full int64 range)
};

struct FillParams {
  Dist dist = Dist::Uniform;
  float a = 0.f, b = 0.f;
  uint64_t range = 0;  // RandomRange
  int64_t base = 0;    // RandomRange
  BufferRef p;         // BernoulliTensor: probabilities
  // BernoulliTensor: the DeviceChecks code (runtime/device_checks.h) a probability outside
  // [0, 1] or NaN reports through the device error word (raised at the next read-back).
  uint32_t check_code = 0;
};

// The WGSL library's random.wgsl (Philox-4x32-10, words to draws) and `rng_block(i)`, block
// i of the kernel's counter range, reading key and counter base from its Philox uniforms
// (set_philox).
std::string philox_wgsl();

// The Philox blocks a fill of `numel` elements draws: element i takes block i / 4 (its
// word i % 4; for normal and log-normal the i % 4-th of the Box-Muller values of its two
// word pairs) or, for the 64-bit integer distributions, block i / 2 (its word pair i % 2).
uint64_t fill_blocks(Dist d, uint64_t numel);

// Fills `numel` contiguous elements of `out` with draws from `params.dist`, from the
// counter `philox.offset` on. Returns the number of counter blocks consumed (fill_blocks).
uint64_t fill_random(Context& ctx, const BufferRef& out, uint64_t numel, const FillParams& params,
                     const PhiloxInput& philox);

// Writes a uniformly random permutation of 0..n-1 to `out` (contiguous, any computable
// dtype): random 64-bit keys, sorted with a bitonic network; `scratch` must hold
// 3 * next_pow2(n) u32 words. Returns blocks consumed.
uint64_t random_permutation(Context& ctx, const BufferRef& out, uint64_t n, WGPUBuffer scratch,
                            const PhiloxInput& philox);
uint64_t permutation_scratch_words(uint64_t n);

// Multinomial sampling over `rows` rows of `cats` categories (probs contiguous, float
// dtype). First pass: per-row statistics into `stats` (per row: sum as f32 bits, flags:
// 1 = negative, 2 = inf/nan, 4 = sum <= 0) and, when `cdf` is non-null, the running sums.
void multinomial_prepare(Context& ctx, const BufferRef& probs, uint64_t rows, uint64_t cats,
                         WGPUBuffer stats, WGPUBuffer cdf);
// With replacement: `samples` draws per row by binary search on the running sums.
uint64_t multinomial_with_replacement(Context& ctx, const BufferRef& probs, WGPUBuffer cdf,
                                      uint64_t rows, uint64_t cats, uint64_t samples,
                                      const BufferRef& out, const PhiloxInput& philox);
// Without replacement: keys p / Exp(1) (exponential race), the `samples` largest per row,
// in decreasing order. `keys` holds rows * cats f32.
uint64_t multinomial_without_replacement(Context& ctx, const BufferRef& probs, WGPUBuffer keys,
                                         uint64_t rows, uint64_t cats, uint64_t samples,
                                         const BufferRef& out, const PhiloxInput& philox);

// Dropout's forward in one pass over `numel` contiguous elements: mask = (u < keep),
// out = (x * mask) * scale (the CPU's rounding: x * 0 keeps the sign and NaN of x).
// `out` and `mask` (bool) are fresh buffers. Returns blocks consumed (numel).
uint64_t dropout_forward(Context& ctx, const BufferRef& in, const BufferRef& out,
                         const BufferRef& mask, uint64_t numel, float keep, float scale,
                         const PhiloxInput& philox);

// Sets flag word 0 to 1 when any of the `numel` contiguous elements of `x` (a float dtype)
// is negative or NaN (normal's check of a std tensor, without a reduction and its sync
// until the flag is read).
void flag_negative_or_nan(Context& ctx, const BufferRef& x, uint64_t numel, WGPUBuffer flag);

}  // namespace rng
}  // namespace twgpu
