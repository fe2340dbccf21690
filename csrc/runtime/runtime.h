// The runtime's public face for the layers above: one include, one lock.
#pragma once
#include <mutex>

#include "runtime/buffer_pool.h"
#include "runtime/command_recorder.h"
#include "runtime/config.h"
#include "runtime/context.h"
#include "runtime/device_checks.h"
#include "runtime/error.h"
#include "runtime/pipeline_cache.h"

namespace twgpu {

// Holds the runtime lock for the scope of one operation. Autograd runs backward on its
// own thread, so every entry point from torch takes it.
class RuntimeLock {
 public:
  RuntimeLock() : ctx_(Context::get()), lock_(ctx_.mutex()) { ctx_.enter_thread(); }
  ~RuntimeLock() { ctx_.leave_thread(); }
  RuntimeLock(const RuntimeLock&) = delete;
  RuntimeLock& operator=(const RuntimeLock&) = delete;
  Context& ctx() { return ctx_; }

 private:
  Context& ctx_;
  std::lock_guard<std::recursive_mutex> lock_;
};

}  // namespace twgpu
