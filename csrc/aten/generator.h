// The webgpu generator. Native random kernels draw from a counter-based generator
// (Philox-4x32-10, see kernels/random.h) keyed by the seed, at a 64-bit counter offset
// that each kernel advances by the blocks it consumes (as CUDA's philox offset). Ops that
// still run through the CPU fallback draw from a CPU (mt19937) twin seeded alike, so the
// same seed reproduces both. torch.webgpu.manual_seed / get_rng_state work as on CUDA; a
// state is the CPU twin's state followed by the seed and the offset (8 bytes each).
#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <utility>

namespace twgpu::aten {

class WebGPUGeneratorImpl : public c10::GeneratorImpl {
 public:
  explicit WebGPUGeneratorImpl(c10::DeviceIndex index = 0);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The CPU generator the fallback hands to CPU kernels in place of this one.
  const at::Generator& cpu_generator() const { return cpu_; }

  // (seed, first counter) for a kernel consuming `blocks` counters; advances the offset.
  // Callers hold mutex_.
  std::pair<uint64_t, uint64_t> philox_reserve(uint64_t blocks);

 private:
  WebGPUGeneratorImpl* clone_impl() const override;
  at::Generator cpu_;
  uint64_t philox_seed_;
  uint64_t philox_offset_ = 0;
};

const at::Generator& default_generator();
// The default generator's CPU twin (what CPU kernels of the fallback draw from).
const at::Generator& default_generator_cpu_twin();
at::Generator make_generator();

// (seed, first counter) from `gen` or the default generator, for `blocks` counters.
std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen,
                                             uint64_t blocks);

}  // namespace twgpu::aten
