#include "runtime/submit_worker.h"

#include <chrono>
#include <exception>

#include "runtime/error.h"

namespace twgpu {

// Started here, not in the initialiser list: the thread must see every member built.
SubmitWorker::SubmitWorker() { thread_ = std::thread([this] { run(); }); }

SubmitWorker::~SubmitWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void SubmitWorker::post(std::function<void()> job) {
  join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    busy_.store(true, std::memory_order_release);
    ++jobs_;
  }
  wake_.notify_one();
}

void SubmitWorker::join() {
  if (busy_.load(std::memory_order_acquire)) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return !busy_.load(std::memory_order_acquire); });
    waited_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count();
  }
  if (error_.empty()) return;  // written before busy_ cleared, read after it was seen clear
  std::string message;
  message.swap(error_);
  fail(ErrorKind::Internal, message);
}

void SubmitWorker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || busy_.load(std::memory_order_acquire); });
    if (!busy_.load(std::memory_order_acquire)) return;  // stop_ with no job left
    std::function<void()> job = std::move(job_);
    lock.unlock();
    std::string error;
    try {
      job();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "torch_webgpu: a queued graph replay failed";
    }
    lock.lock();
    error_ = std::move(error);
    busy_.store(false, std::memory_order_release);
    done_.notify_all();
  }
}

}  // namespace twgpu
