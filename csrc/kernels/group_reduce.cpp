#include "kernels/group_reduce.h"

#include <algorithm>

namespace twgpu {
namespace {

std::string u(uint32_t v) { return std::to_string(v) + "u"; }

// Shuffles merging each invocation's value with those `half`, half/2, ..., 1 lanes away: every
// aligned run of 2 * half lanes ends with the run's merge (in the same order on every lane).
std::string butterfly(const GroupReduce& r, const std::string& var, uint32_t half) {
  std::string s;
  for (uint32_t o = half; o > 0; o /= 2)
    s += "  " + var + " = " + r.merge + "(" + var + ", subgroupShuffleXor(" + var + ", " + u(o) + "));\n";
  return s;
}

// The merge of `var` over aligned runs of `run` lanes (run <= subgroup), to every lane.
std::string within_subgroup(const GroupReduce& r, const std::string& var, uint32_t run) {
  if (r.float_sum && run == r.subgroup) return "  " + var + " = subgroupAdd(" + var + ");\n";
  std::string s = butterfly(r, var, run / 2);
  if (!r.symmetric && run > 1)
    s += "  " + var + " = subgroupShuffle(" + var + ", lid % " + u(r.subgroup) + " / " + u(run) + " * " + u(run) + ");\n";
  return s;
}

std::string tree(const GroupReduce& r) {
  const std::string red = r.name + "_red";
  std::string s = "var<workgroup> " + red + ": array<" + r.type + ", " + std::to_string(r.workgroup) + ">;\n"
                  "fn " + r.name + "(v: " + r.type + ", lid: u32) -> " + r.type + " {\n"
                  "  workgroupBarrier();\n  " + red + "[lid] = v;\n  workgroupBarrier();\n"
                  "  let lane = lid % " + u(r.lanes) + ";\n"
                  "  for (var w = " + u(r.lanes / 2) + "; w > 0u; w = w >> 1u) {\n"
                  "    if (lane < w) { " + red + "[lid] = " + r.merge + "(" + red + "[lid], " + red + "[lid + w]); }\n"
                  "    workgroupBarrier();\n  }\n";
  return s + "  return " + red + "[lid - lane];\n}\n";
}

}  // namespace

std::string group_reduce_fn(const GroupReduce& r) {
  const uint32_t S = r.subgroup;
  // Subgroups only where every one is full and a run is whole subgroups or lies in one.
  if (S < 2 || r.workgroup % S != 0 || (r.lanes > S && r.lanes % S != 0) || (r.lanes < S && S % r.lanes != 0))
    return tree(r);
  std::string s;
  const std::string head = "fn " + r.name + "(v: " + r.type + ", lid: u32) -> " + r.type + " {\n  var s = v;\n";
  if (r.lanes <= S) return head + within_subgroup(r, "s", r.lanes) + "  return s;\n}\n";
  // One value per subgroup through workgroup memory; `per` of them make a run.
  const uint32_t per = r.lanes / S;
  const std::string part = r.name + "_part";
  s += "var<workgroup> " + part + ": array<" + r.type + ", " + std::to_string(r.workgroup / S) + ">;\n";
  s += head + within_subgroup(r, "s", S) +
       "  workgroupBarrier();\n"
       "  if (lid % " + u(S) + " == 0u) { " + part + "[lid / " + u(S) + "] = s; }\n"
       "  workgroupBarrier();\n"
       "  let first = " + (r.lanes == r.workgroup ? std::string("0u") : "lid / " + u(r.lanes) + " * " + u(per)) + ";\n"
       "  let k = lid % " + u(S) + ";\n";
  if (per <= S) {
    // Each aligned run of `p` lanes reads all `per` values (the rest the identity) and
    // merges them: every lane ends with the run's merge.
    uint32_t p = 1;
    while (p < per) p *= 2;
    s += "  let j = k % " + u(p) + ";\n"
         "  var t = select(" + r.identity + ", " + part + "[first + min(j, " + u(per - 1) + ")], j < " + u(per) + ");\n" +
         within_subgroup(r, "t", p);
  } else {
    s += "  var t = " + r.identity + ";\n"
         "  for (var i = 0u; i < " + u(per) + "; i = i + " + u(S) + ") { t = " + r.merge + "(t, " + part + "[first + i + k]); }\n" +
         within_subgroup(r, "t", S);
  }
  return s + "  return t;\n}\n";
}

bool uses_subgroups(const std::string& wgsl) {
  for (size_t at = wgsl.find("subgroup"); at != std::string::npos; at = wgsl.find("subgroup", at + 8)) {
    const size_t next = at + 8;
    if (next < wgsl.size() && wgsl[next] >= 'A' && wgsl[next] <= 'Z') return true;
  }
  return false;
}

}  // namespace twgpu
