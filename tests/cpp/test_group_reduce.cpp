// Workgroup reductions (kernels/group_reduce.h): every run length of every workgroup size,
// through the workgroup-memory tree and, where the adapter has them at one size, through
// subgroups (run this suite with VK_DRIVER_FILES naming SwiftShader and
// TORCH_WEBGPU_BACKEND=vulkan to reach that path on a machine without a GPU).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "kernels/group_reduce.h"
#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

enum class Merge { IntSum, FloatSum, Lopsided, ArgMax };

// Each invocation's result of `fn` over 3 workgroups, its own value being a function of its
// group and lid; returned as raw words.
std::vector<uint32_t> run_reduce(Context& ctx, uint32_t wg, uint32_t lanes, uint32_t subgroup, Merge m) {
  const uint32_t groups = 3, n = groups * wg;
  Allocation* out = ctx.pool().allocate(n * 4);
  GroupReduce r;
  r.name = "reduce_all";
  r.workgroup = wg;
  r.lanes = lanes;
  r.subgroup = subgroup;
  std::string value;
  switch (m) {
    case Merge::IntSum:
      r.type = "i32", r.merge = "merge_i", r.identity = "0";
      value = "i32(group * 1000u + lid * lid) - 77";
      break;
    case Merge::FloatSum:  // small integers: exact in any order
      r.type = "f32", r.merge = "merge_f", r.identity = "0.0", r.float_sum = true;
      value = "f32(group * 3u + lid % 7u) - 2.0";
      break;
    case Merge::Lopsided:  // order matters: runs must still agree bit for bit
      r.type = "f32", r.merge = "merge_l", r.identity = "0.0", r.symmetric = false;
      value = "sin(f32(group * wg_size + lid))";
      break;
    case Merge::ArgMax:  // a struct: shuffled field by field; the result is the index
      r.type = "Best", r.fields = "v,i", r.merge = "merge_best", r.identity = "Best(-1e30, 0xffffffffu)";
      value = "Best(f32((lid * 37u + group) % 11u), lid)";
      break;
  }
  KernelLaunch l;
  l.key = "test:group_reduce|" + std::to_string(wg) + "|" + std::to_string(lanes) + "|" +
          std::to_string(subgroup) + "|" + std::to_string(static_cast<int>(m));
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  l.grid = Grid::Groups;
  l.count = groups;
  l.workgroup = wg;
  l.body = [&] {
    return "const wg_size = " + std::to_string(wg) + "u;\n"
           "fn merge_i(a: i32, b: i32) -> i32 { return a + b; }\n"
           "fn merge_f(a: f32, b: f32) -> f32 { return a + b; }\n"
           "fn merge_l(a: f32, b: f32) -> f32 { return a * 0.75 + b * 1.25; }\n"
           "struct Best { v: f32, i: u32 }\n"
           "fn merge_best(a: Best, b: Best) -> Best {\n"
           "  if (b.v > a.v || (b.v == a.v && b.i < a.i)) { return b; }\n  return a;\n}\n" +
           group_reduce_fn(r) + kernel_main(Grid::Groups, wg) +
           "  let v = " + value + ";\n"
           "  let t = reduce_all(v, lid);\n"
           "  if (group < frame_count()) { buf0[group * wg_size + lid] = " +
           (m == Merge::ArgMax ? "t.i" : "bitcast<u32>(t)") + "; }\n}\n";
  };
  launch_kernel(ctx, l);
  std::vector<uint32_t> host(n);
  ctx.recorder().read(out->buffer, 0, host.data(), n * 4);
  ctx.pool().release(out);
  return host;
}

void check(Context& ctx, uint32_t subgroup) {
  for (uint32_t wg : {4u, 8u, 16u, 32u, 64u, 128u, 256u}) {
    if (wg > ctx.caps().workgroup_1d()) continue;
    for (uint32_t lanes = 1; lanes <= wg; lanes *= 2) {
      SCOPED_TRACE("workgroup " + std::to_string(wg) + ", lanes " + std::to_string(lanes) +
                   ", subgroup " + std::to_string(subgroup));
      const std::vector<uint32_t> ints = run_reduce(ctx, wg, lanes, subgroup, Merge::IntSum);
      const std::vector<uint32_t> floats = run_reduce(ctx, wg, lanes, subgroup, Merge::FloatSum);
      const std::vector<uint32_t> lopsided = run_reduce(ctx, wg, lanes, subgroup, Merge::Lopsided);
      const std::vector<uint32_t> best = run_reduce(ctx, wg, lanes, subgroup, Merge::ArgMax);
      for (uint32_t g = 0; g < 3; ++g) {
        for (uint32_t lid = 0; lid < wg; ++lid) {
          const uint32_t first = lid / lanes * lanes;
          int64_t want_i = 0;
          double want_f = 0;
          uint32_t want_best = first;
          for (uint32_t j = first; j < first + lanes; ++j) {
            if ((j * 37 + g) % 11 > (want_best * 37 + g) % 11) want_best = j;
            want_i += static_cast<int64_t>(g * 1000 + j * j) - 77;
            want_f += static_cast<double>(g * 3 + j % 7) - 2.0;
          }
          const size_t at = g * wg + lid;
          ASSERT_EQ(static_cast<int32_t>(ints[at]), want_i) << "group " << g << " lid " << lid;
          float got_f;
          std::memcpy(&got_f, &floats[at], 4);
          ASSERT_EQ(got_f, static_cast<float>(want_f)) << "group " << g << " lid " << lid;
          ASSERT_EQ(lopsided[at], lopsided[g * wg + first]) << "group " << g << " lid " << lid;
          ASSERT_EQ(best[at], want_best) << "group " << g << " lid " << lid;
        }
      }
    }
  }
}

}  // namespace

TEST(GroupReduce, WorkgroupTree) {
  RuntimeLock lock;
  check(lock.ctx(), 0);
}

TEST(GroupReduce, Subgroups) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  if (!ctx.caps().subgroup_size) GTEST_SKIP() << "no subgroups of one size on this adapter";
  check(ctx, ctx.caps().subgroup_size);
}

TEST(GroupReduce, DetectsSubgroupCalls) {
  EXPECT_TRUE(uses_subgroups("  s = subgroupAdd(s);"));
  EXPECT_TRUE(uses_subgroups("x = subgroupShuffleXor(x, 1u);"));
  EXPECT_FALSE(uses_subgroups("// one value per subgroup through workgroup memory"));
  EXPECT_FALSE(uses_subgroups("let subgroups = 3u;"));
}

// group_scan_fn: inclusive scans in invocation order with a merge that does not commute
// (2x2 integer matrix products, wrapping: associative), against the host's.
TEST(GroupReduce, SubgroupScanKeepsOrder) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint32_t S = ctx.caps().subgroup_size;
  if (!S) GTEST_SKIP() << "no subgroups of one size on this adapter";
  using Mat = std::array<uint32_t, 4>;
  auto mul = [](const Mat& a, const Mat& b) {
    return Mat{a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
               a[2] * b[1] + a[3] * b[3]};
  };
  auto value = [](uint32_t g, uint32_t lid) { return Mat{1u + lid % 3u, g + lid % 2u, lid % 5u, 1u + g}; };
  for (uint32_t wg : {S, 2 * S, 64u, 256u}) {
    if (wg > ctx.caps().workgroup_1d() || wg % S) continue;
    SCOPED_TRACE("workgroup " + std::to_string(wg));
    const uint32_t groups = 2, n = groups * wg;
    Allocation* out = ctx.pool().allocate(n * 16);
    GroupReduce r;
    r.name = "scan_all", r.type = "vec4<u32>", r.merge = "mat_mul", r.workgroup = wg, r.lanes = wg, r.subgroup = S;
    KernelLaunch l;
    l.key = "test:group_scan|" + std::to_string(wg);
    l.buffers = {{out->buffer, Access::ReadWrite, false}};
    l.grid = Grid::Groups;
    l.count = groups;
    l.workgroup = wg;
    l.body = [&] {
      return "fn mat_mul(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {\n"
             "  return vec4<u32>(a.x * b.x + a.y * b.z, a.x * b.y + a.y * b.w, a.z * b.x + a.w * b.z, a.z * b.y + a.w * b.w);\n}\n" +
             group_scan_fn(r) + kernel_main(Grid::Groups, wg) +
             "  let v = vec4<u32>(1u + lid % 3u, group + lid % 2u, lid % 5u, 1u + group);\n"
             "  let t = scan_all(v, lid);\n"
             "  if (group < frame_count()) {\n"
             "    let at = 4u * (group * " + std::to_string(wg) + "u + lid);\n"
             "    buf0[at] = t.x; buf0[at + 1u] = t.y; buf0[at + 2u] = t.z; buf0[at + 3u] = t.w;\n  }\n}\n";
    };
    launch_kernel(ctx, l);
    std::vector<uint32_t> host(n * 4);
    ctx.recorder().read(out->buffer, 0, host.data(), n * 16);
    ctx.pool().release(out);
    for (uint32_t g = 0; g < groups; ++g) {
      Mat want = value(g, 0);
      for (uint32_t lid = 0; lid < wg; ++lid) {
        if (lid) want = mul(want, value(g, lid));
        const uint32_t* got = &host[4 * (g * wg + lid)];
        ASSERT_EQ((Mat{got[0], got[1], got[2], got[3]}), want) << "group " << g << " lid " << lid;
      }
    }
  }
}
