#include "kernels/binding_window.h"

#include <algorithm>
#include <cstdlib>

#include "runtime/runtime.h"

namespace twgpu {
namespace {
// A window's end is rounded up to a vec4<u32>: kernels that load or store whole vectors
// may touch up to 15 bytes past a tensor's last element.
constexpr uint64_t kEndRounding = 16;
}  // namespace

ElementRange strided_range(uint64_t offset, const int64_t* sizes, const int64_t* strides,
                           int ndim) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] == 0) return {offset, offset};
    const int64_t reach = (sizes[d] - 1) * strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  return {static_cast<uint64_t>(static_cast<int64_t>(offset) + lo),
          static_cast<uint64_t>(static_cast<int64_t>(offset) + hi) + 1};
}

uint64_t window_budget(Context& ctx) {
  const uint64_t limit = ctx.caps().max_storage_binding_size;
  return limit - ctx.caps().min_storage_offset_alignment - kEndRounding;
}

bool needs_window(Context& ctx, WGPUBuffer buffer) {
  return buffer && ctx.pool().has_oversized() &&
         BufferPool::size_of(buffer) > ctx.caps().max_storage_binding_size;
}

void fail_too_large(Context& ctx, const std::string& op, uint64_t bytes) {
  fail(ErrorKind::Unsupported,
       "torch_webgpu: '" + op + "' would bind " + std::to_string(bytes) +
           " bytes of one tensor, more than one storage binding holds on this device (" +
           std::to_string(ctx.caps().max_storage_binding_size) +
           " bytes), and does not split its work: make the tensor smaller or run the op "
           "over slices of it");
}

BufferWindow window_over(Context& ctx, WGPUBuffer buffer, uint64_t first_byte,
                         uint64_t end_byte, const std::string& op) {
  const uint64_t align = ctx.caps().min_storage_offset_alignment;
  const uint64_t size = BufferPool::size_of(buffer);
  BufferWindow w;
  w.offset = std::min(first_byte, size) / align * align;
  const uint64_t end = std::min(size, (end_byte + kEndRounding - 1) / kEndRounding * kEndRounding);
  w.size = std::max<uint64_t>(end, w.offset + 4) - w.offset;
  if (w.size > ctx.caps().max_storage_binding_size) fail_too_large(ctx, op, end_byte - first_byte);
  return w;
}

uint64_t rows_per_window(Context& ctx, uint64_t rows, uint64_t row_bytes, const std::string& op) {
  if (row_bytes == 0) return std::max<uint64_t>(rows, 1);
  const uint64_t fit = window_budget(ctx) / row_bytes;
  if (fit == 0) fail_too_large(ctx, op, row_bytes);
  return std::max<uint64_t>(1, std::min(rows, fit));
}

std::vector<int64_t> plan_blocks(Context& ctx, const int64_t* sizes, int ndim,
                                 const std::vector<BlockOperand>& operands, int fastest_dim,
                                 const std::string& op) {
  const uint64_t budget = window_budget(ctx);
  std::vector<int64_t> block(sizes, sizes + ndim);
  auto span_bytes = [&](const BlockOperand& o) {
    ElementRange r = strided_range(o.offset, block.data(), o.strides, ndim);
    return (r.end - r.first) * o.element_bytes;
  };
  for (;;) {
    const BlockOperand* worst = nullptr;
    uint64_t worst_bytes = 0;
    for (const BlockOperand& o : operands)
      if (span_bytes(o) > worst_bytes) worst_bytes = span_bytes(*(worst = &o));
    if (worst_bytes <= budget) return block;
    int dim = -1;
    uint64_t reach = 0;
    for (int d = 0; d < ndim; ++d) {
      const uint64_t r = static_cast<uint64_t>(block[d] - 1) * std::abs(worst->strides[d]);
      if (r > reach) reach = r, dim = d;
    }
    if (dim < 0) fail_too_large(ctx, op, worst_bytes);
    const uint64_t step = std::abs(worst->strides[dim]) * worst->element_bytes;
    const uint64_t cut = (worst_bytes - budget + step - 1) / step;
    block[dim] = std::max<int64_t>(1, block[dim] - static_cast<int64_t>(cut));
    if (dim == fastest_dim && block[dim] > 64) block[dim] = block[dim] / 64 * 64;
  }
}

void for_each_block(const int64_t* sizes, int ndim, const std::vector<int64_t>& block,
                    const std::function<void(const int64_t*, const int64_t*)>& fn) {
  std::vector<int64_t> origin(ndim, 0), extent(ndim);
  for (;;) {
    for (int d = 0; d < ndim; ++d) extent[d] = std::min(block[d], sizes[d] - origin[d]);
    fn(origin.data(), extent.data());
    int d = 0;
    for (; d < ndim; ++d) {
      origin[d] += block[d];
      if (origin[d] < sizes[d]) break;
      origin[d] = 0;
    }
    if (d == ndim) return;
  }
}

}  // namespace twgpu
