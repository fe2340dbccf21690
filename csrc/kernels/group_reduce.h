// Reductions across the invocations of a workgroup, as WGSL functions: through subgroup
// operations where the adapter has them at one size, else through a workgroup-memory tree.
#pragma once
#include <cstdint>
#include <string>

namespace twgpu {

// `fn <name>(v: <type>, lid: u32) -> <type>` returns to every invocation the merge of v over
// its run of `lanes` consecutive invocations (lanes == workgroup: the whole group). Every
// invocation of the group calls it in uniform control flow (it holds barriers), and may call
// it again right after (it starts with a barrier).
//
// With subgroups (`subgroup` = Context::caps().subgroup_size, a power of two), a run is
// merged within each subgroup by shuffles (`subgroupAdd` for a plain float sum over whole
// subgroups), and only one value per subgroup goes through workgroup memory: two barriers
// where the tree takes log2(lanes) + 1. Invocation lid is taken to be lane lid % subgroup of
// subgroup lid / subgroup, the order in which every driver we know fills a one-dimensional
// workgroup. The results of a merge that is not associative (float sums) may differ from the
// tree's in the last bits; every invocation of a run gets the same bits either way.
struct GroupReduce {
  std::string name;      // the WGSL function's name; its workgroup arrays take it as prefix
  std::string type;      // "f32", "vec2<f32>", ..., or a struct of such fields
  std::string fields;    // a struct type's field names, comma-separated ("v,i"); "" otherwise
  std::string merge;     // a WGSL function (a, b) -> type
  std::string identity;  // a value that merges as nothing
  uint32_t workgroup = 0;
  uint32_t lanes = 0;    // a power of two dividing workgroup
  uint32_t subgroup = 0; // 0: the tree
  bool float_sum = false;  // merge is f32 `a + b`: subgroupAdd may stand for a shuffle tree
  // merge(a, b) and merge(b, a) are the same bits: shuffles leave every lane the same
  // result. Otherwise the first lane of a run hands its result to the others.
  bool symmetric = true;
};

std::string group_reduce_fn(const GroupReduce& r);

// `fn <name>(v: <type>, lid: u32) -> <type>`: the inclusive scan of v over the workgroup in
// invocation order, `merge(earlier, later)` (need not commute), through subgroup shuffles
// and one value per subgroup in workgroup memory. Only where r.subgroup divides the
// workgroup (r.lanes must equal it); callers keep their own tree elsewhere. Every
// invocation calls it in uniform control flow.
std::string group_scan_fn(const GroupReduce& r);

// The same function without subgroups: a Hillis-Steele scan in workgroup memory (log2
// (workgroup) steps of two barriers each).
std::string group_scan_tree_fn(const GroupReduce& r);

// The field names of `struct <name> { a: T, b: U }` in `wgsl`, comma-separated ("a,b").
std::string wgsl_struct_fields(const std::string& wgsl, const std::string& name);

// Whether `wgsl` calls subgroup built-ins (and so needs `enable subgroups;`).
bool uses_subgroups(const std::string& wgsl);

}  // namespace twgpu
