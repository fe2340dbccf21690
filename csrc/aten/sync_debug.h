// torch.webgpu's sync debug mode (sync_debug.cpp).
#pragma once

namespace twgpu::aten {

int sync_debug_mode();       // 0 default, 1 warn, 2 error
void set_sync_debug_mode(int mode);
// Called where an op reads device data back and waits for it: warns or raises per mode.
void warn_or_error_on_sync();

}  // namespace twgpu::aten
