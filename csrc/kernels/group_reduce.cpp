#include "kernels/group_reduce.h"

#include <algorithm>

namespace twgpu {
namespace {

std::string u(uint32_t v) { return std::to_string(v) + "u"; }

// `fn <name>_<op>(x: T, m: u32) -> T`: the subgroup shuffle `op` of a value, field by field
// for a struct (the built-ins take scalars and vectors only).
std::string shuffle_fn(const GroupReduce& r, const std::string& op) {
  std::string s = "fn " + r.name + "_" + op + "(x: " + r.type + ", m: u32) -> " + r.type + " {\n  return ";
  if (r.fields.empty()) return s + op + "(x, m);\n}\n";
  s += r.type + "(";
  for (size_t at = 0; at <= r.fields.size();) {
    size_t end = r.fields.find(',', at);
    if (end == std::string::npos) end = r.fields.size();
    s += (at ? ", " : "") + op + "(x." + r.fields.substr(at, end - at) + ", m)";
    at = end + 1;
  }
  return s + ");\n}\n";
}

// Shuffles merging each invocation's value with those `half`, half/2, ..., 1 lanes away: every
// aligned run of 2 * half lanes ends with the run's merge (lane 0 of a run merges as the
// tree does: its own side first).
std::string butterfly(const GroupReduce& r, const std::string& var, uint32_t half) {
  std::string s;
  for (uint32_t o = half; o > 0; o /= 2)
    s += "  " + var + " = " + r.merge + "(" + var + ", " + r.name + "_subgroupShuffleXor(" + var + ", " + u(o) + "));\n";
  return s;
}

// The merge of `var` over aligned runs of `run` lanes (run <= subgroup), to every lane.
std::string within_subgroup(const GroupReduce& r, const std::string& var, uint32_t run) {
  if (r.float_sum && run == r.subgroup) return "  " + var + " = subgroupAdd(" + var + ");\n";
  std::string s = butterfly(r, var, run / 2);
  if (!r.symmetric && run > 1)
    s += "  " + var + " = " + r.name + "_subgroupShuffle(" + var + ", lid % " + u(r.subgroup) + " / " + u(run) + " * " + u(run) + ");\n";
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
  std::string s = shuffle_fn(r, "subgroupShuffleXor") + (r.symmetric ? "" : shuffle_fn(r, "subgroupShuffle"));
  const std::string head = "fn " + r.name + "(v: " + r.type + ", lid: u32) -> " + r.type + " {\n  var s = v;\n";
  if (r.lanes <= S) return s + head + within_subgroup(r, "s", r.lanes) + "  return s;\n}\n";
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
         "  var t = " + r.identity + ";\n"
         "  if (j < " + u(per) + ") { t = " + part + "[first + j]; }\n" +
         within_subgroup(r, "t", p);
  } else {
    s += "  var t = " + r.identity + ";\n"
         "  for (var i = 0u; i < " + u(per) + "; i = i + " + u(S) + ") { t = " + r.merge + "(t, " + part + "[first + i + k]); }\n" +
         within_subgroup(r, "t", S);
  }
  return s + "  return t;\n}\n";
}

std::string group_scan_fn(const GroupReduce& r) {
  const uint32_t S = r.subgroup;
  const std::string part = r.name + "_part";
  std::string s = shuffle_fn(r, "subgroupShuffleUp") +
                  "var<workgroup> " + part + ": array<" + r.type + ", " + std::to_string(r.workgroup / S) + ">;\n"
                  "fn " + r.name + "(v: " + r.type + ", lid: u32) -> " + r.type + " {\n"
                  "  var s = v;\n  let k = lid % " + u(S) + ";\n";
  // Within the subgroup: after the step of distance o, lane k holds lanes k - 2o + 1 .. k.
  for (uint32_t o = 1; o < S; o *= 2)
    s += "  { let t = " + r.name + "_subgroupShuffleUp(s, " + u(o) + "); if (k >= " + u(o) + ") { s = " + r.merge + "(t, s); } }\n";
  // Then the totals of the subgroups before this one, in order.
  return s + "  workgroupBarrier();\n"
             "  if (k == " + u(S - 1) + ") { " + part + "[lid / " + u(S) + "] = s; }\n"
             "  workgroupBarrier();\n"
             "  let sg = lid / " + u(S) + ";\n"
             "  if (sg > 0u) {\n"
             "    var p = " + part + "[0];\n"
             "    for (var i = 1u; i < sg; i = i + 1u) { p = " + r.merge + "(p, " + part + "[i]); }\n"
             "    s = " + r.merge + "(p, s);\n"
             "  }\n"
             "  return s;\n}\n";
}

std::string group_scan_tree_fn(const GroupReduce& r) {
  const std::string slots = r.name + "_slots";
  return "var<workgroup> " + slots + ": array<" + r.type + ", " + u(r.workgroup) + ">;\n"
         "fn " + r.name + "(v: " + r.type + ", lid: u32) -> " + r.type + " {\n"
         "  workgroupBarrier();\n"
         "  " + slots + "[lid] = v;\n"
         "  for (var o = 1u; o < " + u(r.workgroup) + "; o = o << 1u) {\n"
         "    workgroupBarrier();\n"
         "    var s = " + slots + "[lid];\n"
         "    if (lid >= o) { s = " + r.merge + "(" + slots + "[lid - o], s); }\n"
         "    workgroupBarrier();\n"
         "    " + slots + "[lid] = s;\n"
         "  }\n"
         "  workgroupBarrier();\n"
         "  return " + slots + "[lid];\n}\n";
}

std::string wgsl_struct_fields(const std::string& wgsl, const std::string& name) {
  const std::string head = "struct " + name + " {";
  const size_t open = wgsl.find(head);
  if (open == std::string::npos) return "";
  const size_t close = wgsl.find('}', open);
  std::string fields;
  for (size_t at = open + head.size(); at < close;) {
    const size_t colon = wgsl.find(':', at);
    if (colon >= close) break;
    std::string field = wgsl.substr(at, colon - at);
    field.erase(0, field.find_first_not_of(" ,\n"));
    fields += (fields.empty() ? "" : ",") + field.substr(0, field.find(' '));
    at = wgsl.find(',', colon);
    if (at == std::string::npos || at > close) break;
    ++at;
  }
  return fields;
}

bool uses_subgroups(const std::string& wgsl) {
  for (size_t at = wgsl.find("subgroup"); at != std::string::npos; at = wgsl.find("subgroup", at + 8)) {
    const size_t next = at + 8;
    if (next < wgsl.size() && wgsl[next] >= 'A' && wgsl[next] <= 'Z') return true;
  }
  return false;
}

}  // namespace twgpu
