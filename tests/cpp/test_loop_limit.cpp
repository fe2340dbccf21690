// caps().max_loop_iterations says the truth about the adapter: a loop of more iterations
// than the limit ends early (Mesa llvmpipe), and one within it runs to completion.
#include <gtest/gtest.h>

#include "kernels/kernel_program.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

// Counts the iterations an inner loop of `inner` runs inside an outer loop of `outer`.
uint32_t count_iterations(Context& ctx, uint32_t outer, uint32_t inner) {
  Allocation* out = ctx.pool().allocate(16);
  KernelLaunch l;
  l.key = "test:loop_count";
  l.buffers = {{out->buffer, Access::ReadWrite, false}};
  static const UniformLayout layout({{"outer"}, {"inner"}});
  l.declare(layout).set_u32("outer", outer).set_u32("inner", inner);
  l.count = 1;
  l.workgroup = 64;
  l.body = [] {
    return kernel_main(Grid::Invocations, 64) +
           "  var n = 0u;\n"
           "  for (var i = 0u; i < u.outer; i = i + 1u) {\n"
           "    for (var j = 0u; j < u.inner; j = j + 1u) { n = n + 1u; }\n"
           "  }\n"
           "  buf0[0] = n;\n}\n";
  };
  launch_kernel(ctx, l);
  uint32_t n = 0;
  ctx.recorder().read(out->buffer, 0, &n, 4);
  ctx.pool().release(out);
  return n;
}

}  // namespace

TEST(LoopLimit, CapabilityMatchesTheAdapter) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  const uint64_t limit = ctx.caps().max_loop_iterations;
  EXPECT_EQ(count_iterations(ctx, 100, 300), 30000u);  // within any limit
  uint32_t big = count_iterations(ctx, 400, 300);      // 120000 inner iterations
  if (limit == 0) {
    EXPECT_EQ(big, 120000u);
  } else {
    EXPECT_LT(big, 120000u) << "the adapter runs long loops: drop the limit for it";
    EXPECT_LE(big, limit + 400);
  }
}
