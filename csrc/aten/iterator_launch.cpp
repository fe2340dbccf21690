#include "aten/iterator_launch.h"

#include <ATen/Dispatch.h>
#include <c10/util/TypeCast.h>

#include "aten/webgpu_tensor.h"

namespace twgpu::aten {

Compute compute_type_of(c10::ScalarType t) { return compute_type_for(to_dtype_or_throw(t)); }

ScalarBits scalar_bits(const c10::Scalar& s, Compute c) {
  if (s.isBoolean()) return ScalarBits::from_int(s.toBool() ? 1 : 0, c);
  if (s.isIntegral(false)) return ScalarBits::from_int(s.toLong(), c);
  if (s.isComplex()) {
    TORCH_CHECK(c == Compute::C64, "torch_webgpu: a complex scalar in a ", compute_name(c),
                " kernel");
    c10::complex<double> z = s.toComplexDouble();
    return ScalarBits::from_c64(static_cast<float>(z.real()), static_cast<float>(z.imag()));
  }
  return ScalarBits::from_double(s.toDouble(), c);
}

// c10::convert semantics, as a tensor cast.
c10::Scalar cast_scalar(const c10::Scalar& s, c10::ScalarType t) {
  if (s.isComplex() || !(c10::isIntegralType(t, /*includeBool=*/true) ||
                         c10::isFloatingType(t)))
    return s;
  c10::Scalar out;
  AT_DISPATCH_ALL_TYPES_AND3(c10::kHalf, c10::kBFloat16, c10::kBool, t, "cast_scalar", [&] {
    if (s.isBoolean()) out = c10::Scalar(c10::convert<scalar_t>(s.toBool()));
    else if (s.isIntegral(false)) out = c10::Scalar(c10::convert<scalar_t>(s.toLong()));
    else out = c10::Scalar(c10::convert<scalar_t>(s.toDouble()));
  });
  return out;
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

namespace {

// The dtype an op's "not implemented for" message names: the iterator's common dtype, as
// the CPU's AT_DISPATCH does (iterators built without type promotion have none).
// TensorIteratorBase::maybe_common_dtype() arrived after torch 2.11; read the protected
// member it reports through a derived-class member pointer, which every version allows.
struct CommonDtypePeek : at::TensorIteratorBase {
  static std::optional<c10::ScalarType> of(const at::TensorIteratorBase& iter) {
    c10::ScalarType t = iter.*(&CommonDtypePeek::common_dtype_);
    return t == c10::ScalarType::Undefined ? std::nullopt : std::optional<c10::ScalarType>(t);
  }
};

c10::ScalarType dispatch_dtype(const at::TensorIteratorBase& iter) {
  if (auto t = CommonDtypePeek::of(iter)) return *t;
  return iter.ntensors() > 1 ? iter.input_dtype(0) : iter.dtype(0);
}

bool is_integer_division(const std::string& op) {
  return op == "div_trunc" || op == "div_floor" || op == "remainder" || op == "fmod";
}

bool reads_original_scalar(const std::string& op) {
  return op == "mul" || op == "div_true" || op == "div_trunc" || op == "div_floor";
}

}  // namespace

void launch_on_iterator(const at::TensorIteratorBase& iter, const std::string& op,
                        Compute compute, ScalarBits p0, ScalarBits p1, ScalarBits p2,
                        ScalarBits p3) {
  // Dtype support is checked before the empty-tensor early return, as the CPU does.
  bool refused_bool = !elementwise_accepts_bool(op) && dispatch_dtype(iter) == c10::kBool;
  if (refused_bool || !elementwise_supports(op, compute)) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", op, "_webgpu\" not implemented for '",
                                c10::toString(dispatch_dtype(iter)), "'");
  }
  if (iter.numel() == 0) return;
  std::optional<c10::ScalarType> common = CommonDtypePeek::of(iter);
  ElementwiseLaunch l;
  l.op = op;
  l.compute = compute;
  l.params[0] = p0;
  l.params[1] = p1;
  l.params[2] = p2;
  l.params[3] = p3;
  int ndim = iter.ndim();
  std::vector<uint64_t> offsets(iter.ntensors(), 0);
  l.operands.reserve(iter.ntensors());
  for (int k = 0; k < iter.ntensors(); ++k) {
    ElementwiseOperand operand;
    operand.dtype = to_dtype_or_throw(iter.dtype(k));
    if (k > 0 && iter.is_cpu_scalar(k)) {
      operand.is_scalar = true;
      c10::Scalar item = iter.tensor(k).item();
      // The CPU casts scalars to the common dtype before the kernel runs: integers wrap
      // (uint8 > 300 compares with 44) and half types round (float16 + 1.0004 adds 1),
      // except that its mul and div kernels read a half type's scalar divisor/factor
      // unrounded (original_scalar_value): do the same.
      bool unrounded = k == 2 && common && at::isReducedFloatingType(*common) &&
                       reads_original_scalar(op);
      if (common && iter.tensor(k).scalar_type() != *common && !unrounded)
        item = cast_scalar(item, *common);
      // Integer division by a zero scalar raises, as on the CPU. (Zero tensor divisors
      // cannot be checked without a read-back; like CUDA, they give unspecified values.)
      TORCH_CHECK(!(k == 2 && compute != Compute::F32 && is_integer_division(op) &&
                    item.toLong() == 0),
                  "ZeroDivisionError");
      operand.scalar = scalar_bits(item, compute);
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
