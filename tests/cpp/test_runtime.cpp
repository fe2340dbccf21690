// Runtime and kernel-library tests with no torch: device bring-up, buffer pool,
// read/write round trips, and elementwise kernels checked against exact answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/elementwise.h"
#include "runtime/runtime.h"

using namespace twgpu;

namespace {

Allocation* upload(Context& ctx, const void* data, size_t bytes) {
  Allocation* a = ctx.pool().allocate(bytes);
  std::vector<uint8_t> padded((bytes + 3) / 4 * 4, 0);
  std::memcpy(padded.data(), data, bytes);
  ctx.recorder().write(a->buffer, 0, padded.data(), padded.size());
  return a;
}

template <typename T>
std::vector<T> download(Context& ctx, Allocation* a, size_t n) {
  size_t bytes = (n * sizeof(T) + 3) / 4 * 4;
  std::vector<uint8_t> raw(bytes);
  ctx.recorder().read(a->buffer, 0, raw.data(), bytes);
  std::vector<T> out(n);
  std::memcpy(out.data(), raw.data(), n * sizeof(T));
  return out;
}

ElementwiseOperand contiguous(Allocation* a, DType t, int ndim) {
  ElementwiseOperand op;
  op.buffer = a->buffer;
  op.dtype = t;
  if (ndim) op.strides[0] = 1;
  return op;
}

}  // namespace

TEST(Context, CreatesADevice) {
  RuntimeLock lock;
  const auto& info = lock.ctx().adapter();
  EXPECT_FALSE(info.name.empty());
  EXPECT_NE(info.backend, "null");
  EXPECT_GT(lock.ctx().caps().max_buffer_size, 0u);
}

TEST(BufferPool, ReusesFreedBuffersAndKeepsStats) {
  RuntimeLock lock;
  BufferPool& pool = lock.ctx().pool();
  uint64_t before = pool.stats().allocated;
  Allocation* a = pool.allocate(1000);
  EXPECT_EQ(a->capacity, BufferPool::bucket_size(1000));
  EXPECT_EQ(pool.stats().allocated, before + a->capacity);
  WGPUBuffer buffer = a->buffer;
  uint64_t address = a->address;
  pool.release(a);
  EXPECT_EQ(pool.stats().allocated, before);
  Allocation* b = pool.allocate(1000);
  EXPECT_EQ(b->buffer, buffer);
  EXPECT_EQ(b->address, address);
  pool.release(b);
  pool.empty_cache();
  EXPECT_LE(pool.stats().reserved, pool.stats().peak_reserved);
}

TEST(BufferPool, BucketsBoundSlack) {
  for (uint64_t n : {1ull, 255ull, 257ull, 1000ull, 4097ull, 123456789ull}) {
    uint64_t b = BufferPool::bucket_size(n);
    EXPECT_GE(b, n);
    EXPECT_EQ(b % 512, 0u);
    if (n > 4096) EXPECT_LE(b, n + n / 8);
    if (n > (1u << 20)) EXPECT_LE(b, n + n / 32);
  }
}

TEST(BufferPool, BucketSizesAreExact) {
  // 512-byte blocks (CUDA's rounding), 8 steps per octave below 1 MiB, 32 above.
  const std::pair<uint64_t, uint64_t> cases[] = {
      {1, 512},       {512, 512},         {513, 1024},         {4096, 4096},
      {4097, 4608},   {100000, 106496},   {1048575, 1048576},  {1048577, 1081344},
      {17432576, 17825792},    // Qwen2.5's 896 x 4864 fp32 MLP weight
      {544538624, 553648128},  // its 151936 x 896 fp32 embedding: 528 MiB, not 640
  };
  for (const auto& [n, expected] : cases) EXPECT_EQ(BufferPool::bucket_size(n), expected) << n;
}

TEST(BufferPool, TooLargeIsOutOfMemory) {
  RuntimeLock lock;
  uint64_t too_big = lock.ctx().caps().max_buffer_size + 1;
  try {
    lock.ctx().pool().allocate(too_big);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
  }
  Allocation* ok = lock.ctx().pool().allocate(64);  // the next allocation works
  lock.ctx().pool().release(ok);
}

TEST(Recorder, WriteReadRoundTrip) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  std::vector<uint32_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint32_t>(i * 2654435761u);
  Allocation* a = upload(ctx, data.data(), data.size() * 4);
  EXPECT_EQ(download<uint32_t>(ctx, a, data.size()), data);
  ctx.pool().release(a);
}

TEST(Elementwise, AddFloat32WithAlpha) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  std::vector<float> x = {1, 2, 3, 4, 5}, y = {10, 20, 30, 40, 50};
  Allocation *ax = upload(ctx, x.data(), 20), *ay = upload(ctx, y.data(), 20);
  Allocation* out = ctx.pool().allocate(20);
  ElementwiseLaunch l;
  l.op = "add";
  l.compute = Compute::F32;
  l.ndim = 1;
  l.sizes[0] = 5;
  l.operands = {contiguous(out, DType::Float32, 1), contiguous(ax, DType::Float32, 1),
                contiguous(ay, DType::Float32, 1)};
  l.params[0] = ScalarBits::from_f32(2.0f);
  launch_elementwise(ctx, l);
  auto r = download<float>(ctx, out, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r[i], x[i] + 2 * y[i]);
  for (auto* a : {ax, ay, out}) ctx.pool().release(a);
}

TEST(Elementwise, Int64ExactArithmetic) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  std::vector<int64_t> x = {INT64_MAX, INT64_MIN, -7, 1ll << 53, 123456789012345ll, -1};
  std::vector<int64_t> y = {-1, 1, 2, 3, -98765, 7};
  Allocation *ax = upload(ctx, x.data(), 48), *ay = upload(ctx, y.data(), 48);
  Allocation* out = ctx.pool().allocate(48);
  struct Case { const char* op; int64_t (*ref)(int64_t, int64_t); };
  const Case cases[] = {
      {"mul", [](int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }},
      {"sub", [](int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }},
      {"div_trunc", [](int64_t a, int64_t b) { return (a == INT64_MIN && b == -1) ? a : a / b; }},
      {"remainder", [](int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }},
  };
  for (const auto& c : cases) {
    ElementwiseLaunch l;
    l.op = c.op;
    l.compute = Compute::I64;
    l.ndim = 1;
    l.sizes[0] = 6;
    l.operands = {contiguous(out, DType::Int64, 1), contiguous(ax, DType::Int64, 1),
                  contiguous(ay, DType::Int64, 1)};
    l.params[0] = ScalarBits::from_i64(1);
    launch_elementwise(ctx, l);
    auto r = download<int64_t>(ctx, out, 6);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(r[i], c.ref(x[i], y[i])) << c.op << " at " << i;
  }
  for (auto* a : {ax, ay, out}) ctx.pool().release(a);
}

TEST(Elementwise, NarrowStoresDoNotClobberNeighbours) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  // Write every other uint8 of a 4-word buffer; the untouched bytes must survive.
  std::vector<uint8_t> base(16);
  for (int i = 0; i < 16; ++i) base[i] = static_cast<uint8_t>(100 + i);
  Allocation* out = upload(ctx, base.data(), 16);
  ElementwiseLaunch l;
  l.op = "fill";
  l.compute = Compute::I32;
  l.ndim = 1;
  l.sizes[0] = 8;
  ElementwiseOperand o = contiguous(out, DType::UInt8, 1);
  o.offset = 1;
  o.strides[0] = 2;
  l.operands = {o};
  l.params[0] = ScalarBits::from_i32(7);
  launch_elementwise(ctx, l);
  auto r = download<uint8_t>(ctx, out, 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(r[i], i % 2 ? 7 : 100 + i) << i;
  ctx.pool().release(out);
}

TEST(Elementwise, ConversionsRoundLikeTheCpu) {
  RuntimeLock lock;
  Context& ctx = lock.ctx();
  std::vector<float> x = {1.0f, 65519.0f, 65520.0f, -1e9f, 0.1f, NAN, 3.5f, -2.5f};
  Allocation* ax = upload(ctx, x.data(), x.size() * 4);
  Allocation* out = ctx.pool().allocate(x.size() * 2);
  ElementwiseLaunch l;
  l.op = "copy";
  l.compute = Compute::F32;
  l.ndim = 1;
  l.sizes[0] = static_cast<int64_t>(x.size());
  l.operands = {contiguous(out, DType::Float16, 1), contiguous(ax, DType::Float32, 1)};
  launch_elementwise(ctx, l);
  auto h = download<uint16_t>(ctx, out, x.size());
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0x7bff);  // 65519 rounds down to the largest half
  EXPECT_EQ(h[2], 0x7c00);  // 65520 rounds to infinity
  EXPECT_EQ(h[3], 0xfc00);
  EXPECT_EQ(h[4], 0x2e66);
  EXPECT_EQ(h[5] & 0x7c00, 0x7c00);
  EXPECT_NE(h[5] & 0x3ff, 0);
  for (auto* a : {ax, out}) ctx.pool().release(a);
}

TEST(Pipelines, BadWgslIsAShaderCompileError) {
  RuntimeLock lock;
  try {
    lock.ctx().pipelines().get("bad", [] {
      ProgramDesc d;
      d.label = "deliberately_bad";
      d.wgsl = "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_thing; }";
      return d;
    });
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::ShaderCompile);
    EXPECT_NE(std::string(e.what()).find("deliberately_bad"), std::string::npos);
  }
  lock.ctx().check_errors();  // nothing left pending
}
