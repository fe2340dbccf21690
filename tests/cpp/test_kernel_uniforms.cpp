// Named uniforms, typed pipeline keys and plans of the kernel frame: the declared layout
// follows WGSL's uniform-buffer rules, values land where the shader reads them, mistakes
// (an unset or undeclared uniform) are refused with the kernel's name, and a plan records
// again with the same result as a fresh launch. The nn frame's parameters reach the body
// by name, and it packs a declaration's words in order (KernelLaunch::set_fields).
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

const UniformLayout& mixed_layout() {
  static const UniformLayout layout({{"first", UniformType::U32},
                                     {"shift", UniformType::I32},
                                     {"scale", UniformType::F32},
                                     {"sizes", UniformType::U32, 5},
                                     {"last", UniformType::U32}});
  return layout;
}

}  // namespace

TEST(KernelUniforms, LayoutFollowsUniformBufferRules) {
  const UniformLayout& layout = mixed_layout();
  ASSERT_EQ(layout.fields().size(), 5u);
  // Scalars pack after the frame's vec4; an array starts on 16 bytes and takes whole vec4s.
  EXPECT_EQ(layout.fields()[0].word, 4u);
  EXPECT_EQ(layout.fields()[1].word, 5u);
  EXPECT_EQ(layout.fields()[2].word, 6u);
  EXPECT_EQ(layout.fields()[3].word, 8u);
  EXPECT_EQ(layout.fields()[4].word, 16u);
  EXPECT_EQ(layout.words(), 20u);  // rounded to the struct's 16-byte alignment
  const std::string wgsl = layout.wgsl(3);
  EXPECT_NE(wgsl.find("  frame: vec4<u32>,\n  first: u32,\n  shift: i32,\n  scale: f32,\n"
                      "  sizes: array<vec4<u32>, 2>,\n  last: u32,\n}"),
            std::string::npos)
      << wgsl;
  EXPECT_NE(wgsl.find("@group(0) @binding(3) var<uniform> u: Uniforms;"), std::string::npos);
  EXPECT_NE(wgsl.find("fn u_sizes(i: u32) -> u32 { return u.sizes[i >> 2u][i & 3u]; }"),
            std::string::npos);
}

TEST(KernelUniforms, LayoutHashDependsOnNamesTypesAndLengths) {
  const UniformLayout a({{"n", UniformType::U32}, {"v", UniformType::U32, 4}});
  const UniformLayout same({{"n", UniformType::U32}, {"v", UniformType::U32, 4}});
  const UniformLayout renamed({{"m", UniformType::U32}, {"v", UniformType::U32, 4}});
  const UniformLayout retyped({{"n", UniformType::I32}, {"v", UniformType::U32, 4}});
  const UniformLayout longer({{"n", UniformType::U32}, {"v", UniformType::U32, 8}});
  EXPECT_EQ(a.hash(), same.hash());
  EXPECT_NE(a.hash(), renamed.hash());
  EXPECT_NE(a.hash(), retyped.hash());
  EXPECT_NE(a.hash(), longer.hash());
}

TEST(KernelUniforms, LayoutRefusesBadNames) {
  EXPECT_THROW(UniformLayout({{"frame", UniformType::U32}}), Error);
  EXPECT_THROW(UniformLayout({{"n", UniformType::U32}, {"n", UniformType::F32}}), Error);
  EXPECT_THROW(UniformLayout({{"2x", UniformType::U32}}), Error);
  EXPECT_THROW(UniformLayout({{"a.b", UniformType::U32}}), Error);
  EXPECT_THROW(UniformLayout({{"v", UniformType::F32, 4}}), Error);  // arrays are u32
}

TEST(KernelUniforms, LayoutBuiltAtRunTimeMatchesTheLiteralOne) {
  // A family whose uniforms depend on its variant (matmul) builds its layout from a vector.
  std::vector<UniformDecl> decls = {{"first", UniformType::U32}, {"shift", UniformType::I32},
                                    {"scale", UniformType::F32}};
  decls.push_back({"sizes", UniformType::U32, 5});
  decls.push_back({"last", UniformType::U32});
  const UniformLayout built(decls);
  EXPECT_EQ(built.hash(), mixed_layout().hash());
  EXPECT_EQ(built.words(), mixed_layout().words());
  EXPECT_EQ(built.wgsl(3), mixed_layout().wgsl(3));
}

TEST(KernelUniforms, ValuesLandAtTheirWordsInAnyOrder) {
  // Sets usually follow the declaration (found without a scan); any other order, repeats
  // and a second declare land at the same words.
  KernelLaunch in_order, shuffled;
  in_order.declare(mixed_layout()).set_u32("first", 1).set_i32("shift", 2).set_f32("scale", 3.0f)
      .set_u32s("sizes", {4, 5}).set_u32("last", 6);
  shuffled.declare(mixed_layout()).set_u32("last", 9).set_u32("first", 1).set_u32s("sizes", {4, 5})
      .set_f32("scale", 3.0f).set_u32("last", 6).set_i32("shift", 2);
  EXPECT_EQ(in_order.unset_mask(), 0u);
  EXPECT_EQ(shuffled.unset_mask(), 0u);
  EXPECT_EQ(in_order.uniforms, shuffled.uniforms);
  EXPECT_EQ(in_order.set_u32("first", 1).word_of("first"), 4u);  // the word of the one just set
  EXPECT_EQ(in_order.word_of("last"), 16u);
  in_order.set_u32s("sizes", {});  // an empty braced list: no words, the field counts as set
  EXPECT_EQ(in_order.uniforms, shuffled.uniforms);
  shuffled.declare(mixed_layout());
  EXPECT_EQ(shuffled.unset_mask(), 0x1fu);
  shuffled.set_u32("first", 7);
  EXPECT_EQ(shuffled.uniforms[4], 7u);
  EXPECT_EQ(shuffled.unset_mask(), 0x1eu);
}

TEST(KernelUniforms, ValuesPackAtTheirWordsWithTheirTypes) {
  KernelLaunch l;
  l.typed.family = "test:pack";
  l.declare(mixed_layout());
  ASSERT_EQ(l.uniforms.size(), 20u);
  EXPECT_EQ(l.unset_mask(), 0x1fu);
  l.set_u32("first", 11).set_i32("shift", -3).set_f32("scale", 0.5f).set_u32s("sizes", {1, 2, 3, 4, 5});
  EXPECT_EQ(l.unset_mask(), 0x10u);  // "last" still unset
  l.set_u32("last", 99);
  EXPECT_EQ(l.unset_mask(), 0u);
  float scale;
  std::memcpy(&scale, &l.uniforms[6], 4);
  EXPECT_EQ(l.uniforms[4], 11u);
  EXPECT_EQ(static_cast<int32_t>(l.uniforms[5]), -3);
  EXPECT_EQ(scale, 0.5f);
  EXPECT_EQ(std::vector<uint32_t>(l.uniforms.begin() + 8, l.uniforms.begin() + 13),
            (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(l.uniforms[16], 99u);
  EXPECT_EQ(l.word_of("last"), 16u);
  // Wrong type, unknown name, too long an array: refused, naming the kernel.
  EXPECT_NE(error_of([&] { l.set_f32("first", 1.0f); }).find("test:pack"), std::string::npos);
  EXPECT_NE(error_of([&] { l.set_u32("nope", 1); }).find("'nope' that it does not declare"),
            std::string::npos);
  EXPECT_THROW(l.set_u32s("sizes", {1, 2, 3, 4, 5, 6}), Error);
  EXPECT_THROW(l.set_u32("sizes", 1), Error);
}

TEST(KernelUniforms, ShaderReadsEveryTypeByName) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t n = 1000;
  Allocation* out = ctx.pool().allocate(n * 4);
  KernelLaunch l;
  l.typed = {"test:named_read", {}};
  l.declare(mixed_layout());
  l.set_u32("first", 7).set_i32("shift", -2).set_f32("scale", 0.25f);
  l.set_u32s("sizes", {10, 20, 30, 40, 50}).set_u32("last", 1000);
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = n;
  l.workgroup = 64;
  l.body = [&] {
    return kernel_main(Grid::Invocations, 64) +
           "  let v = i32(u.first + u_sizes(idx % 5u)) + u.shift;\n"
           "  buf0[idx] = bitcast<u32>(f32(v) * u.scale + f32(u.last));\n}\n";
  };
  launch_kernel(ctx, l);
  std::vector<float> host(n);
  ctx.recorder().read(out->buffer, 0, host.data(), n * 4);
  ctx.pool().release(out);
  const uint32_t sizes[5] = {10, 20, 30, 40, 50};
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(host[i], static_cast<float>(7 + static_cast<int>(sizes[i % 5]) - 2) * 0.25f + 1000.0f)
        << i;
}

TEST(KernelUniforms, UnsetUniformIsRefusedAtLaunch) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  KernelLaunch l;
  l.typed.family = "test:unset";
  l.declare(mixed_layout());
  l.set_u32("first", 1).set_i32("shift", 0).set_f32("scale", 1.0f).set_u32s("sizes", {});
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = 4;
  l.workgroup = 64;
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = u.last;\n}\n"; };
  const std::string message = error_of([&] { launch_kernel(ctx, l); });
  EXPECT_NE(message.find("kernel 'test:unset' launches with uniform 'last' never set"),
            std::string::npos)
      << message;
  ctx.pool().release(out);
}

TEST(KernelUniforms, UndeclaredUniformInTheBodyIsRefused) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  static const UniformLayout layout({{"n", UniformType::U32}});
  KernelLaunch l;
  l.typed.family = "test:undeclared";
  l.declare(layout).set_u32("n", 3);
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = 4;
  l.workgroup = 64;
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = u.n + u.x;\n}\n"; };
  std::string message = error_of([&] { launch_kernel(ctx, l); });
  EXPECT_NE(message.find("kernel 'test:undeclared' reads uniform u.x that it does not declare"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("(declared: n)"), std::string::npos) << message;
  // An array accessor of a scalar (or of nothing) is refused the same way.
  l.typed.family = "test:undeclared_array";
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = u_n(idx);\n}\n"; };
  message = error_of([&] { launch_kernel(ctx, l); });
  EXPECT_NE(message.find("reads uniform u_n that it does not declare as an array"),
            std::string::npos)
      << message;
  ctx.pool().release(out);
}

TEST(KernelUniforms, NameCheckIgnoresOtherIdentifiers) {
  const UniformLayout layout({{"n", UniformType::U32}, {"dims", UniformType::U32, 4}});
  // `mu.x`, `v.u.y`, a local `u_lo` and the body's own `fn u_pick(` are not uniforms.
  EXPECT_NO_THROW(check_uniform_names(
      "fn u_pick(i: u32) -> u32 { return i; }\n let mu = vec2<f32>(); let a = mu.x + v.u.y;\n"
      " let u_lo = u.n + u_dims(1u) + u.frame.x + u_pick(2u);\n",
      layout, "test"));
  EXPECT_THROW(check_uniform_names(" let a = u.dims;\n", layout, "test"), Error);
}

TEST(KernelUniforms, TypedKeysSeparateVariantsAndShareRepeats) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  static const UniformLayout layout({{"value", UniformType::U32}});
  auto launch = [&](uint32_t variant, uint32_t value) {
    KernelLaunch l;
    l.typed = {"test:typed_key", {variant}};
    l.declare(layout).set_u32("value", value);
    l.buffers = {{out->buffer, Access::ReadWrite, false}};
    l.count = 1;
    l.workgroup = 64;
    // The variant changes the source: the key must tell the two apart.
    l.body = [variant] {
      return kernel_main(Grid::Invocations, 64) + "  buf0[0] = u.value + " +
             std::to_string(variant * 1000) + "u;\n}\n";
    };
    launch_kernel(ctx, l);
    uint32_t host = 0;
    ctx.recorder().read(out->buffer, 0, &host, 4);
    return host;
  };
  const size_t before = ctx.pipelines().size();
  EXPECT_EQ(launch(1, 5), 1005u);
  EXPECT_EQ(launch(2, 5), 2005u);
  EXPECT_EQ(launch(1, 6), 1006u);  // same variant, new value: the first pipeline again
  EXPECT_EQ(ctx.pipelines().size(), before + 2);
  ctx.pool().release(out);
}

TEST(KernelUniforms, PlanRecordsAgainLikeAFreshLaunch) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t n = 3000;
  Allocation* out = ctx.pool().allocate(n * 4);
  static const UniformLayout layout({{"step", UniformType::U32}});
  KernelLaunch l;
  l.typed.family = "test:plan_add";
  l.declare(layout).set_u32("step", 3);
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = n;
  l.workgroup = 64;
  l.body = [] {
    return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = buf0[idx] + u.step + idx;\n}\n";
  };
  std::vector<uint32_t> zeros(n, 0);
  ctx.recorder().write(out->buffer, 0, zeros.data(), n * 4);
  const KernelPlan plan = plan_kernel(ctx, l);
  ASSERT_NE(plan.pipeline, nullptr);
  EXPECT_EQ(plan.buffers.size(), 1u);
  EXPECT_EQ(plan.uniforms.size(), layout.words());
  EXPECT_EQ(plan.uniforms[0], n);  // the frame's count word
  EXPECT_GE(uint64_t{plan.groups_x} * plan.groups_y * 64, n);
  for (int r = 0; r < 4; ++r) record(ctx, plan);
  std::vector<uint32_t> host(n);
  ctx.recorder().read(out->buffer, 0, host.data(), n * 4);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(host[i], 4 * (3 + i)) << i;
  // An empty launch plans to nothing and records nothing.
  l.count = 0;
  const KernelPlan empty = plan_kernel(ctx, l);
  EXPECT_EQ(empty.pipeline, nullptr);
  record(ctx, empty);
  ctx.pool().release(out);
}

TEST(KernelUniforms, WordsWithoutADeclarationAreRefused) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  Allocation* out = ctx.pool().allocate(256);
  KernelLaunch l;
  l.typed.family = "test:numbered";
  l.uniforms = {0, 0, 0, 0, 7u};
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.count = 4;
  l.workgroup = 64;
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = 1u;\n}\n"; };
  const std::string message = error_of([&] { launch_kernel(ctx, l); });
  EXPECT_NE(message.find("kernel 'test:numbered' sets uniform words without declaring a layout"),
            std::string::npos)
      << message;
  // Without uniforms of its own a kernel reads the frame's by name.
  l.uniforms.clear();
  l.body = [] { return kernel_main(Grid::Invocations, 64) + "  buf0[idx] = frame_count();\n}\n"; };
  launch_kernel(ctx, l);
  std::vector<uint32_t> host(4);
  ctx.recorder().read(out->buffer, 0, host.data(), 16);
  ctx.pool().release(out);
  for (uint32_t v : host) EXPECT_EQ(v, 4u);
}

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
