// The convolution forward's plan (kernels/convolution.h), which eager and the engine share:
// a 1x1 convolution multiplies x without scratch, others gather B (implicit GEMM) or write
// im2col columns as TORCH_WEBGPU_CONV_IMPLICIT says, with the scratch each needs.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/convolution.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

ConvGeometry conv2d(uint32_t batch, uint32_t k, uint32_t pad) {
  ConvGeometry g;
  g.batch = batch;
  g.groups = 2;
  g.cx = 4;
  for (int d = 1; d < 3; ++d) {
    g.xs[d] = 8;
    g.ks[d] = k;
    g.pad[d] = pad;
    g.ys[d] = 8 + 2 * pad - k + 1;
  }
  return g;
}

ConvForwardPlan plan_with(const char* implicit, const ConvGeometry& g) {
  setenv("TORCH_WEBGPU_CONV_IMPLICIT", implicit, 1);
  RuntimeLock lock;
  ConvForwardPlan p = plan_conv_forward(lock.ctx(), g, 32);
  unsetenv("TORCH_WEBGPU_CONV_IMPLICIT");
  return p;
}

}  // namespace

TEST(ConvolutionPlan, PointwiseNeedsNoScratch) {
  const ConvForwardPlan p = plan_with("1", conv2d(3, 1, 0));
  ASSERT_EQ(p.pieces.size(), 1u);
  EXPECT_EQ(p.pieces[0].columns, ConvColumns::Pointwise);
  EXPECT_EQ(p.pieces[0].g.batch, 3u);
  EXPECT_EQ(p.col_elements, 0u);
  EXPECT_EQ(p.tap_words, 0u);
}

TEST(ConvolutionPlan, ImplicitGemmNeedsTapsOnly) {
  const ConvForwardPlan p = plan_with("1", conv2d(3, 3, 1));
  ASSERT_EQ(p.pieces.size(), 1u);
  EXPECT_EQ(p.pieces[0].columns, ConvColumns::Gather);
  EXPECT_EQ(p.col_elements, 0u);
  EXPECT_EQ(p.tap_words, 4u * 4 * 9);  // 4 words per row (c, k)
}

TEST(ConvolutionPlan, Im2colNeedsColumnsOfThePass) {
  const ConvForwardPlan p = plan_with("0", conv2d(3, 3, 0));
  ASSERT_EQ(p.pieces.size(), 1u);
  EXPECT_EQ(p.pieces[0].columns, ConvColumns::Im2col);
  EXPECT_EQ(p.tap_words, 0u);
  EXPECT_EQ(p.col_elements, 3u * 2 * (4 * 9) * (6 * 6));  // images * groups * rows * positions
}
