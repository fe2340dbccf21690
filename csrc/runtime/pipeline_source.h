// The declaration (WGSL, binding kinds, uniform size) each cached pipeline was built from,
// kept so that captured work can be written out as data (the engine's web bundle,
// engine/web_bundle.h). A side table rather than fields of Pipeline: pipeline_cache.h
// reaches nearly every file, and only the bundle writer reads these.
#pragma once
#include "runtime/pipeline_cache.h"

namespace twgpu {

// Null for a pipeline the cache did not build. Call under the runtime lock.
const ProgramDesc* pipeline_source(const Pipeline& p);

}  // namespace twgpu
