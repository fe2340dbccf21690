// NumPy .npy files (format versions 1-3, little-endian, C order) for the CLI.
#pragma once
#include <string>

#include "engine/engine.h"

namespace twgpu::engine {

HostTensor read_npy(const std::string& path);  // Error(InvalidArgument) naming the problem
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace twgpu::engine
