// The WGSL math library against the CPU's IEEE arithmetic, run as custom kernels over
// the preludes: correctly rounded division from deliberately perturbed quotients (what a
// driver with approximate division hands over).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/wgsl_library.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

// Runs `body` (WGSL statements computing `out[i]` from `x[i]`, `y[i]`, `k[i]`) over n elements.
std::vector<uint32_t> run_kernel(Context& ctx, const std::string& name, const std::string& body,
                                 const std::vector<float>& x, const std::vector<float>& y,
                                 const std::vector<int32_t>& k) {
  std::string wgsl = std::string(
      "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"
      "@group(0) @binding(1) var<storage, read> y: array<f32>;\n"
      "@group(0) @binding(2) var<storage, read> k: array<i32>;\n"
      "@group(0) @binding(3) var<storage, read_write> out: array<u32>;\n") +
      wgsl::kFloatPrelude + wgsl::kInt64Prelude + wgsl::kMathPrelude +
      "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
      "  let i = gid.x;\n  if (i >= arrayLength(&out)) { return; }\n" + body + "}\n";
  const Pipeline& p = ctx.pipelines().get("test:" + name, [&] {
    ProgramDesc d;
    d.label = name;
    d.wgsl = wgsl;
    d.storage = {Access::Read, Access::Read, Access::Read, Access::ReadWrite};
    return d;
  });
  size_t n = x.size(), bytes = n * 4;
  Allocation* bufs[4];
  const void* src[3] = {x.data(), y.data(), k.data()};
  for (int i = 0; i < 4; ++i) {
    bufs[i] = ctx.pool().allocate(bytes);
    if (i < 3) ctx.recorder().write(bufs[i]->buffer, 0, src[i], bytes);
  }
  // The binding covers the whole bucket; arrayLength would see its padding, so n must
  // fill it: callers pass multiples of 64 elements.
  WGPUBuffer handles[4] = {bufs[0]->buffer, bufs[1]->buffer, bufs[2]->buffer, bufs[3]->buffer};
  ctx.recorder().dispatch(p, handles, nullptr, static_cast<uint32_t>((n + 63) / 64));
  std::vector<uint32_t> out(n);
  ctx.recorder().read(bufs[3]->buffer, 0, out.data(), bytes);
  for (auto* b : bufs) ctx.pool().release(b);
  return out;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

TEST(WgslMath, DivisionIsCorrectlyRoundedFromPerturbedQuotients) {
  RuntimeLock lock;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> expo(-60, 60);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::vector<float> a, b;
  std::vector<int32_t> k;
  const int perturb[] = {-3, -2, -1, 0, 1, 2, 3};
  // Random operands over a wide range, plus exact quotients, powers of two and near-ties.
  for (int i = 0; i < 2048; ++i) {
    float x = std::ldexp(mant(rng), expo(rng)) * (i % 3 == 0 ? -1.0f : 1.0f);
    float y = std::ldexp(mant(rng), expo(rng)) * (i % 5 == 0 ? -1.0f : 1.0f);
    if (i % 7 == 0) x = y * std::ldexp(1.0f, expo(rng) / 4);         // power-of-two quotient
    if (i % 11 == 0) x = y * static_cast<float>(1 + (i % 97));        // small integer quotient
    if (i % 13 == 0) y = std::ldexp(1.0f, expo(rng));                  // power-of-two divisor
    a.push_back(x);
    b.push_back(y);
    k.push_back(perturb[i % 7]);
  }
  auto got = run_kernel(lock.ctx(), "div_correct",
                        "  let q = x[i] / y[i];\n"
                        "  let q0 = bitcast<f32>(bitcast<u32>(q) + bitcast<u32>(k[i]));\n"
                        "  out[i] = bitcast<u32>(div_correct(x[i], y[i], q0));\n",
                        a, b, k);
  int wrong = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    float want = a[i] / b[i];
    if (want == 0.0f || !std::isfinite(want) || std::fpclassify(want) == FP_SUBNORMAL) continue;
    if (got[i] != to_bits(want) && wrong++ < 10)
      ADD_FAILURE() << a[i] << " / " << b[i] << " perturbed by " << k[i] << ": got "
                    << from_bits(got[i]) << " want " << want;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(WgslMath, DivisionFastPathMatchesTheCpu) {
  RuntimeLock lock;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> expo(-120, 120);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::vector<float> a, b;
  std::vector<int32_t> k;
  for (int i = 0; i < 4096; ++i) {
    a.push_back(std::ldexp(mant(rng), expo(rng) / 2) * (i % 2 ? -1.0f : 1.0f));
    b.push_back(std::ldexp(mant(rng), expo(rng) / 2));
    k.push_back(i % 7 - 3);
  }
  // div_rounded as div_f32 calls it, fed a quotient up to 3 ulp off (what a driver with
  // approximate division returns): the fast path must restore the IEEE quotient.
  auto got = run_kernel(lock.ctx(), "div_fast",
                        "  let q0 = bitcast<f32>(bitcast<u32>(x[i] / y[i]) + bitcast<u32>(k[i]));\n"
                        "  out[i] = bitcast<u32>(div_rounded(x[i], y[i], q0));\n",
                        a, b, k);
  int wrong = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (got[i] != to_bits(a[i] / b[i]) && wrong++ < 10)
      ADD_FAILURE() << a[i] << " / " << b[i] << ": got " << from_bits(got[i]);
  EXPECT_EQ(wrong, 0);
}
