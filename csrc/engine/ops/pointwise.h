// Shared by the pointwise op files: broadcasting program tensors onto an output and
// turning them into the elementwise kernel's operands (kernels/elementwise.h).
#pragma once
#include <string>
#include <vector>

#include "engine/op_registry.h"
#include "kernels/dtype.h"

namespace twgpu::engine {

// A tensor, or a scalar already converted to the op's compute type.
struct PointwiseInput {
  const DeviceTensor* tensor = nullptr;
  ScalarBits scalar;
};

// The broadcast of the inputs' shapes (fails naming the shapes when they do not broadcast).
std::vector<int64_t> broadcast_shapes(const OpBuilder& b, const std::vector<const DeviceTensor*>& ts);

// Records out = op(inputs...) with parameters p0, p1 (alpha, ...) in compute type `compute`.
// Inputs broadcast to out's shape; any strides on either side.
Launch pointwise_launch(const std::string& op, Compute compute, const DeviceTensor& out,
                        const std::vector<PointwiseInput>& inputs, ScalarBits p0 = {},
                        ScalarBits p1 = {}, ScalarBits p2 = {});

// dst = src (converting the dtype, broadcasting src to dst's shape).
Launch copy_launch(const DeviceTensor& src, const DeviceTensor& dst);

}  // namespace twgpu::engine
