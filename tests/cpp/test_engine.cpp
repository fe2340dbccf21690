// The AOT engine without torch: the seed program from a JSON string against its known
// answer (through Executable and through the Context API), the loader's refusals, and a
// fuzz loop over truncated and mutated programs that must only ever raise twgpu::Error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/engine.h"
#include "engine/web_bundle.h"
#include "runtime/error.h"

using namespace twgpu;
using namespace twgpu::engine;

namespace {

const char* kSeed = R"({
  "version": 1,
  "values": [
    {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 0, "offset": 0}},
    {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 1, "offset": 0}},
    {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 2, "offset": 0}},
    {"type": "float", "value": 1.5},
    {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 3, "offset": 0}},
    {"type": "tensor", "dtype": "float32", "shape": [2, 2], "mem": {"pool": 0, "offset": 0}}
  ],
  "chain": [
    {"op": "aten::add.Tensor", "args": [0, 1, 3], "outputs": [4]},
    {"op": "aten::mm", "args": [4, 2], "outputs": [5]}
  ],
  "inputIds": [0, 1, 2],
  "outputIds": [5],
  "memoryPlan": {"pools": [{"id": 0, "size": 16}, {"id": 1, "size": 16}, {"id": 2, "size": 16}, {"id": 3, "size": 16}]}
})";

HostTensor f32(std::vector<float> v, std::vector<int64_t> shape) {
  HostTensor h;
  h.shape = std::move(shape);
  h.data.resize(v.size() * 4);
  std::memcpy(h.data.data(), v.data(), h.data.size());
  return h;
}

std::vector<float> floats(const HostTensor& h) {
  std::vector<float> v(h.data.size() / 4);
  std::memcpy(v.data(), h.data.data(), h.data.size());
  return v;
}

std::vector<HostTensor> seed_inputs() {
  return {f32({1, 2, 3, 4}, {2, 2}), f32({2, 4, 6, 8}, {2, 2}), f32({4, 8, 12, 16}, {2, 2})};
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// The message of the twgpu::Error that loading (and running) raises, or "" if none.
std::string load_error(const std::string& json, const std::vector<uint8_t>& weights = {}) {
  try {
    auto exe = Executable::load(json, weights);
    exe->run(seed_inputs());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Engine, SeedProgramGivesKnownAnswer) {
  auto exe = Executable::load(kSeed, {});
  for (int run = 0; run < 3; ++run) {  // pool 0 is rewritten by each run's output
    std::vector<HostTensor> out = exe->run(seed_inputs());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(floats(out[0]), (std::vector<float>{112, 160, 240, 352}));
  }
  EXPECT_EQ(exe->launches_per_run(), 2u);
}

TEST(Engine, WebBundleOfTheSeedReplaysToTheKnownAnswer) {
  auto exe = Executable::load(kSeed, {});
  const WebBundle b = make_web_bundle(*exe);
  EXPECT_NE(b.json.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(b.json.find("\"kind\": \"dispatch\""), std::string::npos);
  const std::string dir = (std::filesystem::temp_directory_path() / "twgpu_seed_bundle").string();
  write_web_bundle(*exe, dir);
  std::vector<HostTensor> out = run_web_bundle(dir, seed_inputs());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(floats(out[0]), (std::vector<float>{112, 160, 240, 352}));
  // The engine still runs after a bundle was made from it.
  EXPECT_EQ(floats(exe->run(seed_inputs())[0]), (std::vector<float>{112, 160, 240, 352}));
  std::vector<HostTensor> two = seed_inputs();
  two.pop_back();
  try {
    run_web_bundle(dir, two);
    ADD_FAILURE() << "a missing input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes 3 inputs, got 2"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Engine, ContextRecordsShadersAndPrograms) {
  engine::Context ctx;
  std::vector<HostTensor> in = seed_inputs();
  std::vector<engine::Tensor> ts;
  for (const HostTensor& h : in) {
    ts.push_back(ctx.tensor(DType::Float32, {2, 2}));
    ts.back().set_data(h.data.data(), h.data.size());
  }
  engine::Tensor sum = ctx.tensor(DType::Float32, {2, 2}), prod = ctx.tensor(DType::Float32, {2, 2});
  Value alpha;
  alpha.kind = ValueKind::Float;
  alpha.f = 1.5;
  ctx.record_shader("aten::add.Tensor", {ShaderArg::of(ts[0]), ShaderArg::of(ts[1]), ShaderArg::of(alpha)}, {sum});
  ctx.record_shader("aten::mm", {ShaderArg::of(sum), ShaderArg::of(ts[2])}, {prod});
  auto exe = Executable::load(kSeed, {});
  engine::Tensor out = ctx.tensor(DType::Float32, {2, 2});
  ctx.record_program(*exe, ts, {out});
  ctx.submit();
  ctx.sync();
  EXPECT_EQ(floats(sum.get_data()), (std::vector<float>{4, 8, 12, 16}));
  EXPECT_EQ(floats(prod.get_data()), (std::vector<float>{112, 160, 240, 352}));
  EXPECT_EQ(floats(out.get_data()), (std::vector<float>{112, 160, 240, 352}));
  EXPECT_THROW(ctx.record_shader("aten::no_such_op", {ShaderArg::of(sum)}, {prod}), Error);
  EXPECT_THROW(ctx.record_program(*exe, {ts[0]}, {out}), Error);
}

TEST(Engine, UnknownOpFailsAtLoadNamingOpAndIndex) {
  const std::string msg = load_error(replaced(kSeed, "aten::mm", "aten::frobnicate"));
  EXPECT_NE(msg.find("chain[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aten::frobnicate"), std::string::npos) << msg;
}

TEST(Engine, OverlappingLifetimesInOnePoolAreRefused) {
  // The add's output in pool 0 while in1 (pool 0) is still read by the add itself.
  const std::string json = replaced(kSeed, R"("mem": {"pool": 3, "offset": 0})", R"("mem": {"pool": 0, "offset": 0})");
  const std::string msg = load_error(json);
  EXPECT_NE(msg.find("values 0 and 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pool 0"), std::string::npos) << msg;
  // Disjoint bytes of one pool may live together.
  std::string apart = replaced(kSeed, R"("mem": {"pool": 3, "offset": 0})", R"("mem": {"pool": 3, "offset": 16})");
  apart = replaced(apart, R"({"id": 3, "size": 16})", R"({"id": 3, "size": 32})");
  EXPECT_EQ(load_error(apart), "");
}

TEST(Engine, BadProgramsAreRefusedWithClearErrors) {
  struct Case { std::string json, expect; };
  const std::vector<Case> cases = {
      {replaced(kSeed, R"("args": [4, 2])", R"("args": [4, 9])"), "value 9"},
      {replaced(kSeed, R"("version": 1)", R"("version": 7)"), "version 7"},
      {replaced(kSeed, R"("inputIds": [0, 1, 2])", R"("inputIds": [0, 1])"), "before anything defines it"},
      {replaced(kSeed, R"("dtype": "float32", "shape": [2, 2], "mem": {"pool": 2)",
                R"("dtype": "float32", "shape": [3, 2], "mem": {"pool": 2)"), "does not fit in pool 2"},
      {replaced(replaced(kSeed, R"("dtype": "float32", "shape": [2, 2], "mem": {"pool": 2)",
                         R"("dtype": "float32", "shape": [3, 2], "mem": {"pool": 2)"),
                R"({"id": 2, "size": 16})", R"({"id": 2, "size": 32})"), "cannot be multiplied"},
      {replaced(kSeed, R"("type": "float", "value": 1.5)", R"("type": "complex", "value": 1.5)"), "unknown value type"},
      {replaced(kSeed, R"("shape": [2, 2], "mem": {"pool": 1)", R"("shape": [1048576, 1048576, 1048576], "mem": {"pool": 1)"), "more than 2^40 elements"},
      {replaced(kSeed, R"("shape": [2, 2], "mem": {"pool": 1)", R"("shape": [2, 2], "strides": [1, 2], "mem": {"pool": 1)"), "must be contiguous"},
      {replaced(kSeed, R"("mem": {"pool": 3, "offset": 0})", R"("mem": {"pool": 3, "offset": 2})"), "not a multiple of 4"},
      {replaced(kSeed, R"("dtype": "float32", "shape": [2, 2], "mem": {"pool": 1)", R"("dtype": "float64", "shape": [2, 2], "mem": {"pool": 1)"), "float64"},
      {replaced(kSeed, R"({"op": "aten::mm", "args": [4, 2], "outputs": [5]})",
                R"({"op": "aten::mm", "args": [4, 2], "outputs": [3]})"), "not a tensor"},
  };
  for (const Case& c : cases) {
    const std::string msg = load_error(c.json);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected \"" << c.expect << "\", got \"" << msg << "\"";
  }
}

TEST(Engine, TruncatedWeightsAreRefused) {
  // in3 as a constant of weights.bin instead of an input.
  std::string json = replaced(kSeed, R"("dtype": "float32", "shape": [2, 2], "mem": {"pool": 2, "offset": 0})",
                              R"("dtype": "float32", "shape": [2, 2], "constant": {"offset": 0})");
  json = replaced(json, R"("inputIds": [0, 1, 2])", R"("inputIds": [0, 1], "weights": {"size": 16})");
  std::vector<float> w = {4, 8, 12, 16};
  std::vector<uint8_t> bytes(16);
  std::memcpy(bytes.data(), w.data(), 16);
  auto exe = Executable::load(json, bytes);
  std::vector<HostTensor> in = seed_inputs();
  in.pop_back();
  EXPECT_EQ(floats(exe->run(in)[0]), (std::vector<float>{112, 160, 240, 352}));
  bytes.resize(12);
  try {
    Executable::load(json, bytes);
    FAIL() << "a truncated weights.bin loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(Engine, WrongInputsAreRefusedOnRun) {
  auto exe = Executable::load(kSeed, {});
  std::vector<HostTensor> in = seed_inputs();
  in[1].shape = {4};
  EXPECT_THROW(exe->run(in), Error);
  in = seed_inputs();
  in[2].dtype = DType::Int32;
  try {
    exe->run(in);
    FAIL() << "an int32 input was accepted for a float32 one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 2: expected float32[2, 2], got int32[2, 2]"), std::string::npos) << e.what();
  }
  in = seed_inputs();
  in.pop_back();
  EXPECT_THROW(exe->run(in), Error);
  in = seed_inputs();
  in[0].data.resize(8);
  EXPECT_THROW(exe->run(in), Error);
  // Still works after the refusals.
  EXPECT_EQ(floats(exe->run(seed_inputs())[0]), (std::vector<float>{112, 160, 240, 352}));
}

TEST(Engine, FuzzedProgramsNeverCrash) {
  const std::string seed = kSeed;
  size_t refused = 0, loaded = 0;
  for (size_t n = 0; n < seed.size(); n += 3) {  // truncations
    const std::string msg = load_error(seed.substr(0, n));
    EXPECT_FALSE(msg.empty()) << "a program cut at " << n << " loaded";
    ++refused;
  }
  std::mt19937 rng(1234);
  const std::string alphabet = "0123456789-[]{},:\" aeflnrstu.";
  for (int i = 0; i < 3000; ++i) {
    std::string s = seed;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(at, 1 + rng() % 4); break;
        default: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    // Either a clean refusal or a program that runs (then it must still add up when the
    // edit left the arithmetic alone; that is not checked here).
    if (load_error(s).empty()) ++loaded;
    else ++refused;
  }
  EXPECT_GT(refused, 0u);
  std::printf("fuzz: %zu refused, %zu loaded and ran\n", refused, loaded);
}
