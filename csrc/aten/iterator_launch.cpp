#include "aten/iterator_launch.h"

#include "aten/webgpu_tensor.h"

namespace twgpu::aten {

Compute compute_type_of(c10::ScalarType t) { return compute_type_for(to_dtype_or_throw(t)); }

ScalarBits scalar_bits(const c10::Scalar& s, Compute c) {
  if (s.isBoolean()) return ScalarBits::from_int(s.toBool() ? 1 : 0, c);
  if (s.isIntegral(false)) return ScalarBits::from_int(s.toLong(), c);
  TORCH_CHECK(!s.isComplex(), "torch_webgpu: complex scalars are not supported by device kernels");
  return ScalarBits::from_double(s.toDouble(), c);
}

namespace {

// Launches one kernel over dims [0, ndim) with every operand starting at `offsets`.
void launch_block(const at::TensorIteratorBase& iter, ElementwiseLaunch& l, int ndim,
                  const std::vector<uint64_t>& offsets) {
  l.ndim = ndim;
  for (int d = 0; d < ndim; ++d) l.sizes[d] = iter.shape()[d];
  for (size_t k = 0; k < l.operands.size(); ++k)
    if (!l.operands[k].is_scalar) l.operands[k].offset = offsets[k];
  RuntimeLock lock;
  launch_elementwise(lock.ctx(), l);
}

// More dims than a kernel takes: loop over the outermost ones on the host.
void launch_dims(const at::TensorIteratorBase& iter, ElementwiseLaunch& l, int ndim,
                 std::vector<uint64_t> offsets) {
  if (ndim <= kMaxElementwiseDims) return launch_block(iter, l, ndim, offsets);
  int outer = ndim - 1;
  for (int64_t i = 0; i < iter.shape()[outer]; ++i) {
    std::vector<uint64_t> o = offsets;
    for (size_t k = 0; k < l.operands.size(); ++k)
      if (!l.operands[k].is_scalar)
        o[k] += static_cast<uint64_t>(i * iter.strides(k)[outer] /
                                      element_size(l.operands[k].dtype));
    launch_dims(iter, l, outer, o);
  }
}

}  // namespace

void launch_on_iterator(const at::TensorIteratorBase& iter, const std::string& op,
                        Compute compute, ScalarBits p0, ScalarBits p1) {
  if (iter.numel() == 0) return;
  if (!elementwise_supports(op, compute)) {
    c10::ScalarType t = iter.ntensors() > 1 ? iter.input_dtype(0) : iter.dtype(0);
    TORCH_CHECK(false, "\"", op, "_webgpu\" not implemented for '", c10::toString(t), "'");
  }
  ElementwiseLaunch l;
  l.op = op;
  l.compute = compute;
  l.params[0] = p0;
  l.params[1] = p1;
  int ndim = iter.ndim();
  std::vector<uint64_t> offsets(iter.ntensors(), 0);
  for (int k = 0; k < iter.ntensors(); ++k) {
    ElementwiseOperand operand;
    operand.dtype = to_dtype_or_throw(iter.dtype(k));
    if (k > 0 && iter.is_cpu_scalar(k)) {
      operand.is_scalar = true;
      operand.scalar = scalar_bits(iter.tensor(k).item(), compute);
      // The kernel reads a scalar in the compute type; its dtype only names the variant.
      l.operands.push_back(operand);
      continue;
    }
    const at::TensorBase& t = iter.tensor_base(k);
    TORCH_CHECK(t.device().type() == kDeviceType, "torch_webgpu: operand ", k, " of ", op,
                " is on ", t.device(), ", expected webgpu");
    Allocation* a = allocation_of(t);
    TORCH_INTERNAL_ASSERT(a, "torch_webgpu: operand without a buffer");
    operand.buffer = a->buffer;
    int64_t esize = element_size(operand.dtype);
    uint64_t byte_offset = static_cast<uint64_t>(static_cast<const char*>(iter.data_ptr(k)) -
                                                 reinterpret_cast<const char*>(a->address));
    offsets[k] = byte_offset / esize;
    auto strides = iter.strides(k);
    for (int d = 0; d < ndim && d < kMaxElementwiseDims; ++d)
      operand.strides[d] = strides[d] / esize;
    l.operands.push_back(operand);
  }
  TWGPU_TRY
  if (ndim <= kMaxElementwiseDims) {
    launch_block(iter, l, ndim, offsets);
  } else {
    // Strides beyond the kernel's dims are read from the iterator while looping.
    launch_dims(iter, l, ndim, offsets);
  }
  TWGPU_CATCH
}

}  // namespace twgpu::aten
