// The webgpu generator. Until random kernels run on the device, random ops run through
// the CPU fallback, so the generator wraps a CPU (mt19937) generator: the same seed gives
// the same numbers, and torch.webgpu.manual_seed / get_rng_state work as on CUDA.
#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

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

 private:
  WebGPUGeneratorImpl* clone_impl() const override;
  at::Generator cpu_;
};

const at::Generator& default_generator();
// The default generator's CPU twin (what CPU kernels of the fallback draw from).
const at::Generator& default_generator_cpu_twin();
at::Generator make_generator();

}  // namespace twgpu::aten
