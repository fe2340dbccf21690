#include "aten/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>

#include <cstring>
#include <mutex>

#include "aten/webgpu_tensor.h"
#include "runtime/graph_capture.h"
#include "runtime/profiler.h"
#include "runtime/runtime.h"

namespace twgpu::aten {

namespace {
constexpr size_t kPhiloxStateBytes = 16;  // seed, offset
}

WebGPUGeneratorImpl::WebGPUGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      cpu_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)),
      philox_seed_(c10::default_rng_seed_val) {}

void WebGPUGeneratorImpl::set_current_seed(uint64_t seed) {
  cpu_.set_current_seed(seed);
  philox_seed_ = seed;
  philox_offset_ = 0;
}
void WebGPUGeneratorImpl::set_offset(uint64_t offset) { philox_offset_ = offset; }
uint64_t WebGPUGeneratorImpl::get_offset() const { return philox_offset_; }
uint64_t WebGPUGeneratorImpl::current_seed() const { return philox_seed_; }
uint64_t WebGPUGeneratorImpl::seed() {
  uint64_t s = cpu_.seed();
  philox_seed_ = s;
  philox_offset_ = 0;
  return s;
}

std::pair<uint64_t, uint64_t> WebGPUGeneratorImpl::philox_reserve(uint64_t blocks) {
  uint64_t first = philox_offset_;
  philox_offset_ += blocks;
  return {philox_seed_, first};
}

void WebGPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  const int64_t n = new_state.numel();
  const int64_t cpu_bytes = cpu_.unsafeGetGeneratorImpl()->get_state()->numel();
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  (n == cpu_bytes || n == cpu_bytes + static_cast<int64_t>(kPhiloxStateBytes)),
              "Expected a webgpu generator state of ", cpu_bytes + kPhiloxStateBytes,
              " bytes (torch.uint8), got ", n);
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  at::Tensor cpu_state = at::empty({cpu_bytes}, at::kByte);
  std::memcpy(cpu_state.mutable_data_ptr(), bytes, cpu_bytes);
  cpu_.unsafeGetGeneratorImpl()->set_state(*cpu_state.unsafeGetTensorImpl());
  if (n == cpu_bytes) {  // a CPU state alone: restart the device stream from its seed
    philox_seed_ = cpu_.current_seed();
    philox_offset_ = 0;
  } else {
    std::memcpy(&philox_seed_, bytes + cpu_bytes, 8);
    std::memcpy(&philox_offset_, bytes + cpu_bytes + 8, 8);
  }
}

c10::intrusive_ptr<c10::TensorImpl> WebGPUGeneratorImpl::get_state() const {
  auto cpu_state = cpu_.unsafeGetGeneratorImpl()->get_state();
  const int64_t cpu_bytes = cpu_state->numel();
  at::Tensor state = at::empty({cpu_bytes + static_cast<int64_t>(kPhiloxStateBytes)}, at::kByte);
  auto* out = static_cast<uint8_t*>(state.mutable_data_ptr());
  std::memcpy(out, cpu_state->data(), cpu_bytes);
  std::memcpy(out + cpu_bytes, &philox_seed_, 8);
  std::memcpy(out + cpu_bytes + 8, &philox_offset_, 8);
  return state.getIntrusivePtr();
}

WebGPUGeneratorImpl* WebGPUGeneratorImpl::clone_impl() const {
  auto* copy = new WebGPUGeneratorImpl(device().index());
  copy->cpu_ = cpu_.clone();
  copy->philox_seed_ = philox_seed_;
  copy->philox_offset_ = philox_offset_;
  return copy;
}

const at::Generator& default_generator() {
  static at::Generator gen = at::make_generator<WebGPUGeneratorImpl>(0);
  return gen;
}

const at::Generator& default_generator_cpu_twin() {
  return default_generator().get<WebGPUGeneratorImpl>()->cpu_generator();
}

at::Generator make_generator() { return at::make_generator<WebGPUGeneratorImpl>(0); }

std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen,
                                             uint64_t blocks) {
  const at::Generator& source = gen.has_value() && gen->defined() ? *gen : default_generator();
  auto* impl = at::get_generator_or_default<WebGPUGeneratorImpl>(gen, default_generator());
  if (!CapturedGraph::active()) {
    std::lock_guard<std::mutex> lock(impl->mutex_);
    return impl->philox_reserve(blocks);
  }
  // While a graph captures, the draw is eager code's (the generator advances as it
  // would), and the graph learns it: each replay takes as many blocks again from the
  // generator and moves its draws' counters there (graph_capture.h), as CUDA graphs do.
  // The runtime lock first, as replay() takes it before the generator's.
  RuntimeLock runtime;
  std::pair<uint64_t, uint64_t> drawn;
  {
    std::lock_guard<std::mutex> lock(impl->mutex_);
    drawn = impl->philox_reserve(blocks);
  }
  CapturedGraph* graph = CapturedGraph::active();
  if (graph) {
    TWGPU_TRY
    graph->draw_philox(impl, drawn.first, drawn.second, blocks, [keep = source](uint64_t n) {
      auto* g = keep.get<WebGPUGeneratorImpl>();
      std::lock_guard<std::mutex> lock(g->mutex_);
      return g->philox_reserve(n);
    });
    TWGPU_CATCH
  }
  return drawn;
}

}  // namespace twgpu::aten
