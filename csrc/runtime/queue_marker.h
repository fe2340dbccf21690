// Positions in the device's one queue, for torch.webgpu events. WebGPU orders all work of
// a device on one queue, so "everything submitted so far" is a single point: a marker
// flushes the recorder's pending dispatches and asks Dawn to report when the GPU has
// finished all submitted work. Nothing here blocks except synchronize().
#pragma once
#include <webgpu/webgpu.h>

#include <memory>

namespace twgpu {

class Context;

class QueueMarker {
 public:
  // Marks the current end of the queue (re-recording moves the marker). Runtime lock held.
  // `timing`: where the adapter has timestamp queries, the GPU also writes a timestamp
  // once all earlier work has finished (the end of an empty compute pass), so
  // elapsed_ms() measures GPU time; otherwise host times stand in.
  void record(Context& ctx, bool timing = false);
  bool recorded() const { return state_ != nullptr; }
  // True once the GPU has finished everything before the marker (true if never recorded).
  // Never blocks.
  bool query(Context& ctx);
  // Blocks until the GPU has finished everything before the marker.
  void synchronize(Context& ctx);
  // Host steady-clock time, in milliseconds, at which the runtime first saw the marker's
  // position complete. Valid after query() returned true or synchronize().
  double completed_ms() const;
  // Milliseconds from `start` to `end`, waiting for both: GPU timestamps when both have
  // them, host completion times otherwise.
  static double elapsed_ms(Context& ctx, QueueMarker& start, QueueMarker& end);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Milliseconds of the host's steady clock (the time base of completed_ms()).
double host_clock_ms();

}  // namespace twgpu
