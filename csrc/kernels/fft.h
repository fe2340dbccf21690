// Fast Fourier transforms along one axis of a contiguous tensor viewed as
// [outer, len, inner]: complex values are f32 pairs (real, imaginary). A transform of
// length n is a chain of mixed-radix Stockham passes, one per prime factor of n (4s
// grouped), outputs in natural order. Twiddles come from a host-computed table
// tw[t] = (cos(2 pi t / n), sin(2 pi t / n)), t < n, rounded once.
#pragma once
#include <webgpu/webgpu.h>

#include <cstdint>

namespace twgpu {

class Context;

enum class FftInput : uint8_t {
  Real,       // f32 elements (imaginary part 0)
  Complex,    // complex64 elements
  Hermitian,  // complex64, the first n/2 + 1 of a Hermitian sequence: x[t] = conj(x[n - t])
              // past n/2; the imaginary parts of x[0] (and x[n/2], n even) are ignored
};
enum class FftOutput : uint8_t { Complex, Real /* the real part only, as f32 */ };

struct FftPass {
  WGPUBuffer in = nullptr, twiddles = nullptr, out = nullptr;
  uint64_t in_offset = 0, twiddle_offset = 0, out_offset = 0;  // elements (f32 or complex)
  FftInput input = FftInput::Complex;
  FftOutput output = FftOutput::Complex;
  uint64_t outer = 1, inner = 1;
  uint64_t n = 1;        // transform length
  uint64_t in_len = 1;   // input axis length (>= n, or >= n/2 + 1 for Hermitian input)
  uint64_t out_len = 1;  // outputs kept: the first out_len of the n (<= n)
  bool positive_exponent = false;  // exp(+2 pi i jk / n) (inverse) instead of exp(-...)
  float scale = 1.0f;              // multiplies every output
};

// One mixed-radix Stockham pass: radix R, span Ns (the product of the earlier passes'
// radices). A transform of length n = R1 * R2 * ... is one pass per factor, in order, the
// output of one the input of the next (input kind belongs to the first pass, output kind,
// out_len and scale to the last; intermediates are Complex of axis length n). Output d =
// k + r Ns + q Ns R (k < Ns, r < R) sums, over s < R, input (q Ns + k) + s n / R times
// exp(sign 2 pi i s (k + r Ns) / (Ns R)): R terms, one invocation per output, the
// twiddle index kept exactly in integers. n = 1 is one pass of radix 1; a prime n one
// pass of radix n (the direct DFT, a loop of n iterations).
void fft_pass(Context& ctx, const FftPass& p, uint64_t span, uint64_t radix);

}  // namespace twgpu
