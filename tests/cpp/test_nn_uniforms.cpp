// The nn frame's named parameters: each type reaches the body by name, a body that reads a
// parameter its kernel does not declare is refused with the kernel's name, and the frame
// packs a declaration's words in order (KernelLaunch::set_fields).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_program.h"
#include "kernels/nn_program.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(NnUniforms, ParamsOfEveryTypeReachTheBodyByName) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t n = 300, offset = 5;
  Allocation* out = ctx.pool().allocate((n + offset) * 4);
  nn::NnKernel k;
  k.key = "test_named_params";
  k.outputs = {{out->buffer, offset, DType::Float32}};
  k.param("base", 7).param_i32("shift", -3).param_f32("scale", 0.5f).param_u32s("steps", {1, 2, 3});
  k.body = "fn run(i: u32) { out0(i, f32(i32(u.base + u_steps(i % 3u)) + u.shift) * u.scale); }\n";
  nn::launch_map(ctx, k, n);
  std::vector<float> host(n + offset);
  ctx.recorder().read(out->buffer, 0, host.data(), (n + offset) * 4);
  ctx.pool().release(out);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(host[offset + i], static_cast<float>(7 + static_cast<int>(1 + i % 3) - 3) * 0.5f) << i;
}

TEST(NnUniforms, BodyReadingAnUndeclaredParamIsRefused) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  nn::NnKernel k;
  k.key = "test_undeclared_param";
  k.outputs = {{out->buffer, 0, DType::Float32}};
  k.param("n", 3);
  k.body = "fn run(i: u32) { out0(i, f32(u.n + u.missing)); }\n";
  const std::string message = error_of([&] { nn::launch_map(ctx, k, 4); });
  ctx.pool().release(out);
  EXPECT_NE(message.find("test_undeclared_param"), std::string::npos) << message;
  EXPECT_NE(message.find("reads uniform u.missing that it does not declare"), std::string::npos)
      << message;
}

TEST(NnUniforms, SetFieldsPacksWordsInDeclarationOrder) {
  static const UniformLayout layout({{"a", UniformType::U32},
                                     {"b", UniformType::F32},
                                     {"sizes", UniformType::U32, 3},
                                     {"c", UniformType::I32}});
  KernelLaunch l;
  l.declare(layout).set_u32("a", 1);
  float half = 0.5f;
  uint32_t half_bits;
  std::memcpy(&half_bits, &half, 4);
  const uint32_t words[] = {half_bits, 10, 20, 30, static_cast<uint32_t>(-4)};
  EXPECT_EQ(l.set_fields(1, words), 5u);
  EXPECT_EQ(l.unset_mask(), 0u);
  const auto& f = layout.fields();
  EXPECT_EQ(l.uniforms[f[0].word], 1u);
  EXPECT_EQ(l.uniforms[f[1].word], half_bits);
  EXPECT_EQ(l.uniforms[f[2].word + 0], 10u);
  EXPECT_EQ(l.uniforms[f[2].word + 2], 30u);
  EXPECT_EQ(static_cast<int32_t>(l.uniforms[f[3].word]), -4);
}
