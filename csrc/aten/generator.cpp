#include "aten/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/TensorImpl.h>

namespace twgpu::aten {

WebGPUGeneratorImpl::WebGPUGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      cpu_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}

void WebGPUGeneratorImpl::set_current_seed(uint64_t seed) { cpu_.set_current_seed(seed); }
void WebGPUGeneratorImpl::set_offset(uint64_t offset) { cpu_.set_offset(offset); }
uint64_t WebGPUGeneratorImpl::get_offset() const { return cpu_.get_offset(); }
uint64_t WebGPUGeneratorImpl::current_seed() const { return cpu_.current_seed(); }
uint64_t WebGPUGeneratorImpl::seed() { return cpu_.seed(); }
void WebGPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  cpu_.unsafeGetGeneratorImpl()->set_state(new_state);
}
c10::intrusive_ptr<c10::TensorImpl> WebGPUGeneratorImpl::get_state() const {
  return cpu_.unsafeGetGeneratorImpl()->get_state();
}

WebGPUGeneratorImpl* WebGPUGeneratorImpl::clone_impl() const {
  auto* copy = new WebGPUGeneratorImpl(device().index());
  copy->cpu_ = cpu_.clone();
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

}  // namespace twgpu::aten
