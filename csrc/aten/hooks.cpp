// PrivateUse1 hooks: availability, device count, generators, and the storage resize
// that torch.UntypedStorage.resize_ needs.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>

#include "aten/generator.h"
#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

class WebGPUHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return Context::available(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return Context::initialized(); }
  void init() const override {
    TWGPU_TRY
    Context::get();
    TWGPU_CATCH
  }
  c10::DeviceIndex deviceCount() const override { return Context::available() ? 1 : 0; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    TORCH_CHECK(d == 0, "torch_webgpu: invalid device index ", static_cast<int>(d));
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex) const override { return 0; }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex) const override { return 0; }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    return default_generator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return make_generator(); }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(kDeviceType, 0); }
  bool isPinnedPtr(const void*) const override { return false; }
  c10::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }

};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new WebGPUHooks()); }
} g_register_hooks;

}  // namespace
}  // namespace twgpu::aten
