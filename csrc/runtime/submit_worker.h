// A thread that encodes and submits a graph replay while the caller's thread goes on
// (a compiled decode step returns to Python at once; the ~3 us of host time per replayed
// dispatch then overlaps the Python work that follows). One job at a time. Every other
// queue operation (submit, buffer write, map, work-done marker) calls Context::queue_gate()
// first, which waits for the job: the queue sees the same order as if the job had run
// inline. Dawn is called from two threads, so the device is created with Dawn's
// implicit device synchronization; Dawn's GL backends bind their context to one thread,
// so there the job runs inline (Context::async_submits()). Opt-in
// (TORCH_WEBGPU_ASYNC_REPLAY=1): on NVIDIA's Vulkan driver the replay's wgpuQueueSubmit holds
// Dawn's device lock for most of the replay's host time, so the caller's next Dawn call
// waits for it and compiled decode came out no faster (docs/PERFORMANCE.md).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace twgpu {

class SubmitWorker {
 public:
  SubmitWorker();
  ~SubmitWorker();
  SubmitWorker(const SubmitWorker&) = delete;
  SubmitWorker& operator=(const SubmitWorker&) = delete;

  // Runs `job` on the worker thread after the previous job. A job must not throw; what it
  // reports through fail() is caught and raised by the next join().
  void post(std::function<void()> job);
  // Waits for the posted job (cheap when none is), then raises its failure, if any.
  void join();
  bool busy() const { return busy_.load(std::memory_order_acquire); }

  uint64_t jobs() const { return jobs_; }
  // Host time the caller's thread spent waiting in join() for an unfinished job.
  uint64_t waited_ns() const { return waited_ns_; }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<void()> job_;
  std::atomic<bool> busy_{false};
  bool stop_ = false;
  std::string error_;
  uint64_t jobs_ = 0;
  uint64_t waited_ns_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace twgpu
