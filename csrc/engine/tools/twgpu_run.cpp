// twgpu-run DIR --input x.npy ... [--output y.npy ...] [--repeat N]
// twgpu-run DIR --emit-web OUT   (writes the web bundle: OUT/bundle.json + OUT/buffers.bin)
// Loads DIR/program.json + DIR/weights.bin, runs the program on the inputs and writes the
// outputs; with --repeat, runs N more times and reports the time per run and the dispatches;
// with --profile, times every op alone (a wait after each) and lists the slowest.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/npy.h"
#include "engine/web_bundle.h"
#include "runtime/runtime.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: twgpu-run DIR --input x.npy [--input ...] [--output y.npy ...] [--repeat N] [--profile]\n"
               "       twgpu-run DIR --emit-web OUT\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace twgpu::engine;
  if (argc < 2) return usage();
  std::string dir;
  std::vector<std::string> inputs, outputs;
  long repeat = 0;
  bool profile = false;
  std::string web_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--input" || a == "--output" || a == "--repeat" || a == "--emit-web") && i + 1 >= argc)
      return usage();
    if (a == "--input") inputs.push_back(argv[++i]);
    else if (a == "--output") outputs.push_back(argv[++i]);
    else if (a == "--repeat") repeat = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--profile") profile = true;
    else if (a == "--emit-web") web_out = argv[++i];
    else if (a == "-h" || a == "--help") return usage();
    else if (dir.empty() && a.rfind("--", 0) != 0) dir = a;
    else return usage();
  }
  if (dir.empty() || repeat < 0) return usage();
  try {
    auto exe = Executable::load_dir(dir);
    if (!web_out.empty()) {
      write_web_bundle(*exe, web_out);
      std::printf("wrote %s/bundle.json and %s/buffers.bin\n", web_out.c_str(), web_out.c_str());
      if (inputs.empty()) return 0;
    }
    std::vector<HostTensor> in;
    for (const std::string& p : inputs) in.push_back(read_npy(p));
    if (!outputs.empty() && outputs.size() != exe->num_outputs()) {
      std::fprintf(stderr, "twgpu-run: the program has %zu outputs, %zu --output given\n",
                   exe->num_outputs(), outputs.size());
      return 2;
    }
    std::vector<HostTensor> out = exe->run(in);
    for (size_t i = 0; i < outputs.size(); ++i) write_npy(outputs[i], out[i]);
    if (repeat > 0) {
      twgpu::Context& ctx = twgpu::Context::get();
      const uint64_t d0 = ctx.recorder().dispatches_recorded(), s0 = ctx.recorder().submits();
      const auto t0 = std::chrono::steady_clock::now();
      for (long r = 0; r < repeat; ++r) out = exe->run(in);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("runs %ld  per run %.3f ms  dispatches per run %.1f  submits per run %.1f\n", repeat,
                  1e3 * s / repeat, double(ctx.recorder().dispatches_recorded() - d0) / repeat,
                  double(ctx.recorder().submits() - s0) / repeat);
    }
    if (profile) {
      std::vector<Executable::OpTime> times = exe->profile(in);
      std::sort(times.begin(), times.end(), [](const auto& a, const auto& b) { return a.ms > b.ms; });
      std::printf("slowest ops (each run alone, with a wait):\n");
      for (size_t i = 0; i < times.size() && i < 15; ++i)
        std::printf("  %9.3f ms  chain[%lld] %s\n", times[i].ms, (long long)times[i].index, times[i].op.c_str());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      std::printf("output %zu: %s[", i, twgpu::dtype_name(out[i].dtype));
      for (size_t d = 0; d < out[i].shape.size(); ++d) std::printf(d ? ", %lld" : "%lld", (long long)out[i].shape[d]);
      std::printf("]\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twgpu-run: %s\n", e.what());
    return 1;
  }
  return 0;
}
