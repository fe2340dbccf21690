// Device guard: one WebGPU device (index 0) with one in-order queue, exposed as the
// default stream. synchronizeDevice waits for everything submitted.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "aten/webgpu_tensor.h"

namespace twgpu::aten {
namespace {

class WebGPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kDeviceType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    check(d);
    return c10::Device(kDeviceType, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kDeviceType, 0); }
  void setDevice(c10::Device d) const override { check(d); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}

  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDeviceType, 0));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return getStream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return getStream(s.device()); }

  c10::DeviceIndex deviceCount() const noexcept override {
    return Context::available() ? 1 : 0;
  }

  bool queryStream(const c10::Stream&) const override {
    // Conservative: report pending work until a synchronize says otherwise.
    return !Context::initialized();
  }
  void synchronizeStream(const c10::Stream&) const override { synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { synchronize(); }

 private:
  static void check(c10::Device d) {
    TORCH_CHECK(d.type() == kDeviceType, "expected a webgpu device, got ", d);
    TORCH_CHECK(!d.has_index() || d.index() == 0, "torch_webgpu: invalid device index ",
                static_cast<int>(d.index()), " (there is 1 WebGPU device)");
  }
  static void synchronize() {
    if (!Context::initialized()) return;
    TWGPU_TRY
    RuntimeLock lock;
    lock.ctx().recorder().synchronize();
    TWGPU_CATCH
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, WebGPUGuardImpl);

}  // namespace
}  // namespace twgpu::aten
