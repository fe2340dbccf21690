// Runs a torch-webgpu web bundle (docs/ENGINE.md, "Web bundle") in a browser: the device
// work of one engine run, replayed with WebGPU. No dependencies.
//
//   import { loadBundle } from "./player.js";
//   const adapter = await navigator.gpu.requestAdapter();
//   const b = await loadBundle(adapter, "model_web");   // or a GPUDevice with enough limits
//   const [y] = await b.run([new Float32Array(...)]);  // one typed array per input / output
//
// Everything is made once at load (buffers, contents, pipelines, bind groups, uniforms);
// a run writes the inputs, encodes every step into one command buffer, submits once and
// reads the outputs back. Errors are BundleError with a message saying what is wrong.

export const BUNDLE_FORMAT = "torch-webgpu-web-bundle";
export const BUNDLE_VERSION = 1;

export class BundleError extends Error {
  constructor(message) {
    super(message);
    this.name = "BundleError";
  }
}

function fail(msg) {
  throw new BundleError(msg);
}

// Typed arrays per dtype: half types travel as their raw 16-bit patterns.
const DTYPES = {
  float32: Float32Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int64: BigInt64Array,
  int32: Int32Array,
  int16: Int16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};
const BINDING_KINDS = new Set(["storage", "read-only-storage", "uniform"]);

const isCount = (v) => Number.isSafeInteger(v) && v >= 0;
const round4 = (n) => Math.ceil(n / 4) * 4;

function joinUrl(base, name) {
  return base.endsWith("/") ? base + name : base + "/" + name;
}

async function fetchOk(url) {
  let r;
  try {
    r = await fetch(url);
  } catch (e) {
    fail(`cannot fetch ${url}: ${e.message}`);
  }
  if (!r.ok) fail(`cannot fetch ${url}: HTTP ${r.status}`);
  return r;
}

// Fetches bundle.json and its buffers.bin. Returns { manifest, bin } (bin: ArrayBuffer).
export async function fetchBundle(baseUrl) {
  const jsonUrl = joinUrl(baseUrl, "bundle.json");
  const text = await (await fetchOk(jsonUrl)).text();
  let manifest;
  try {
    manifest = JSON.parse(text);
  } catch (e) {
    fail(`${jsonUrl} is not valid JSON (truncated?): ${e.message}`);
  }
  checkHeader(manifest);
  const bin = await (await fetchOk(joinUrl(baseUrl, manifest.bin.file))).arrayBuffer();
  return { manifest, bin };
}

function checkHeader(m) {
  if (!m || typeof m !== "object" || m.format !== BUNDLE_FORMAT)
    fail(`not a torch-webgpu web bundle (format is ${JSON.stringify(m && m.format)})`);
  if (m.version !== BUNDLE_VERSION)
    fail(`bundle version ${JSON.stringify(m.version)} is not supported: this player reads version ${BUNDLE_VERSION}`);
  if (!m.bin || typeof m.bin.file !== "string" || !isCount(m.bin.size))
    fail("bundle.json: 'bin' must be {file, size}");
}

// Checks every id, size and range against the manifest and buffers.bin; raises naming the
// first thing wrong.
export function validateBundle(m, bin) {
  checkHeader(m);
  if (bin.byteLength !== m.bin.size)
    fail(`${m.bin.file} has ${bin.byteLength} bytes, bundle.json expects ${m.bin.size} (truncated or from another bundle?)`);
  for (const key of ["buffers", "shaders", "steps", "inputs", "outputs", "features"])
    if (!Array.isArray(m[key])) fail(`bundle.json: '${key}' must be an array`);
  if (!m.limits || typeof m.limits !== "object") fail("bundle.json: 'limits' must be an object");
  const binRange = (r, what) => {
    if (!r || !isCount(r.offset) || !isCount(r.size) || r.offset + r.size > bin.byteLength)
      fail(`${what}: bytes ${r && r.offset}..+${r && r.size} are outside ${m.bin.file} (${bin.byteLength} bytes)`);
  };
  m.buffers.forEach((b, i) => {
    if (!b || b.id !== i) fail(`buffers[${i}]: id must be ${i}`);
    if (!isCount(b.size) || b.size === 0 || b.size % 4) fail(`buffers[${i}]: size ${b.size} must be a positive multiple of 4`);
    if (b.content !== undefined) {
      binRange(b.content, `buffers[${i}].content`);
      if (b.content.size > b.size || b.content.size % 4) fail(`buffers[${i}].content: ${b.content.size} bytes do not fit the buffer (${b.size})`);
    }
  });
  const bufferRange = (id, offset, size, what) => {
    if (!isCount(id) || id >= m.buffers.length) fail(`${what}: buffer ${id} does not exist (${m.buffers.length} buffers)`);
    if (!isCount(offset) || !isCount(size) || offset + size > m.buffers[id].size)
      fail(`${what}: bytes ${offset}..+${size} are outside buffer ${id} (${m.buffers[id].size} bytes)`);
  };
  m.shaders.forEach((s, i) => {
    if (!s || typeof s.wgsl !== "string" || typeof s.entryPoint !== "string") fail(`shaders[${i}]: needs wgsl and entryPoint`);
    if (!Array.isArray(s.bindings) || s.bindings.some((k) => !BINDING_KINDS.has(k)))
      fail(`shaders[${i}]: bindings must be kinds among ${[...BINDING_KINDS].join(", ")}`);
    if (!isCount(s.uniformBytes) || (s.uniformBytes > 0) !== (s.bindings.at(-1) === "uniform"))
      fail(`shaders[${i}]: uniformBytes ${s.uniformBytes} does not match its bindings`);
  });
  m.steps.forEach((s, i) => {
    const what = `steps[${i}] (${s && s.kind})`;
    if (s && s.kind === "dispatch") {
      if (!isCount(s.shader) || s.shader >= m.shaders.length) fail(`${what}: shader ${s.shader} does not exist`);
      const sh = m.shaders[s.shader];
      const storage = sh.bindings.filter((k) => k !== "uniform").length;
      if (!Array.isArray(s.bindings) || s.bindings.length !== storage)
        fail(`${what}: ${s.bindings && s.bindings.length} bindings, shader '${sh.label}' has ${storage}`);
      s.bindings.forEach((b, k) => bufferRange(b && b.buffer, b && b.offset, b && b.size, `${what} binding ${k}`));
      if (sh.uniformBytes) {
        binRange(s.uniforms, `${what} uniforms`);
        if (s.uniforms.size !== sh.uniformBytes) fail(`${what}: ${s.uniforms.size} uniform bytes, shader needs ${sh.uniformBytes}`);
      } else if (s.uniforms !== undefined) {
        fail(`${what}: uniforms given, shader '${sh.label}' takes none`);
      }
      if (!Array.isArray(s.workgroups) || s.workgroups.length !== 3 || !s.workgroups.every(isCount))
        fail(`${what}: workgroups must be 3 counts`);
    } else if (s && s.kind === "copy") {
      bufferRange(s.src, s.srcOffset, s.size, `${what} source`);
      bufferRange(s.dst, s.dstOffset, s.size, `${what} destination`);
      if (s.srcOffset % 4 || s.dstOffset % 4 || s.size % 4) fail(`${what}: offsets and size must be multiples of 4`);
    } else if (s && s.kind === "write") {
      binRange(s.data, `${what} data`);
      bufferRange(s.dst, s.dstOffset, s.data.size, `${what} destination`);
      if (s.dstOffset % 4 || s.data.size % 4) fail(`${what}: offset and size must be multiples of 4`);
    } else {
      fail(`${what}: unknown step kind`);
    }
  });
  for (const [key, list] of [["inputs", m.inputs], ["outputs", m.outputs]])
    list.forEach((t, i) => {
      if (!t || !(t.dtype in DTYPES)) fail(`${key}[${i}]: unknown dtype ${t && t.dtype}`);
      if (!Array.isArray(t.shape) || !t.shape.every(isCount)) fail(`${key}[${i}]: shape must be a list of sizes`);
      bufferRange(t.buffer, t.offset, t.byteSize, `${key}[${i}]`);
    });
}

// The device limits and features a bundle needs, checked against an adapter (or a
// device): { requiredLimits, requiredFeatures } for requestDevice.
export function bundleRequirements(m, adapter, what = "adapter") {
  const requiredLimits = {};
  for (const [name, need] of Object.entries(m.limits)) {
    const has = adapter.limits[name];
    if (has === undefined) continue;  // a limit this browser does not know: nothing to ask
    if (has < need) fail(`the ${what}'s ${name} is ${has}, the bundle needs ${need}`);
    if (need > 0) requiredLimits[name] = need;  // 0: a program with no dispatch
  }
  // The engine's adapter had these; asking for them (where possible) keeps its WGSL valid.
  for (const [name, want] of Object.entries(m.preferredLimits || {})) {
    const has = adapter.limits[name];
    if (has === undefined || !want) continue;
    requiredLimits[name] = Math.max(requiredLimits[name] || 0, Math.min(has, want));
  }
  for (const f of m.features)
    if (!adapter.features.has(f)) fail(`the bundle needs the WebGPU feature '${f}', which the ${what} lacks`);
  return { requiredLimits, requiredFeatures: [...m.features] };
}

// A device for the bundle at baseUrl (or an already fetched manifest) from an adapter.
export async function requestBundleDevice(adapter, manifest) {
  return adapter.requestDevice(bundleRequirements(manifest, adapter));
}

// Loads a bundle: `target` is a GPUAdapter (a device with the bundle's limits is made) or a
// GPUDevice (checked against them). `source` is the bundle's base URL or { manifest, bin }.
export async function loadBundle(target, source) {
  const { manifest, bin } = typeof source === "string" ? await fetchBundle(source) : source;
  validateBundle(manifest, bin);
  let device = target;
  if (typeof target.requestDevice === "function") device = await requestBundleDevice(target, manifest);
  else bundleRequirements(manifest, device, "device");  // one that lacks them: a clear error now
  const player = new BundlePlayer(device, manifest, bin);
  await player._build();
  return player;
}

async function scoped(device, what, make) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let value;
  try {
    value = await make();
  } finally {
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    const err = validation || oom;
    if (err) fail(`${what}: ${err.message}`);
  }
  return value;
}

class BundlePlayer {
  constructor(device, manifest, bin) {
    this.device = device;
    this.manifest = manifest;
    this._bin = bin;
    this._busy = Promise.resolve();
  }

  get inputs() {
    return this.manifest.inputs.map(({ dtype, shape }) => ({ dtype, shape }));
  }
  get outputs() {
    return this.manifest.outputs.map(({ dtype, shape }) => ({ dtype, shape }));
  }

  async _build() {
    const { device, manifest: m } = this;
    const bin = this._bin;
    const U = GPUBufferUsage;
    await scoped(device, "creating the bundle's buffers", () => {
      this._buffers = m.buffers.map((b) => {
        const buf = device.createBuffer({ size: b.size, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST, label: `bundle buffer ${b.id} (${b.role})` });
        if (b.content && b.content.size) device.queue.writeBuffer(buf, 0, bin, b.content.offset, b.content.size);
        return buf;
      });
    });
    // Pipelines, one per shader.
    this._pipelines = [];
    for (const [i, s] of m.shaders.entries()) {
      const module = device.createShaderModule({ code: s.wgsl, label: s.label });
      const info = await module.getCompilationInfo();
      const errors = info.messages.filter((x) => x.type === "error");
      if (errors.length)
        fail(`shaders[${i}] '${s.label}' does not compile: ` + errors.map((x) => `${x.lineNum}:${x.linePos} ${x.message}`).join("; "));
      const layout = device.createBindGroupLayout({
        label: s.label,
        entries: s.bindings.map((kind, k) => ({
          binding: k,
          visibility: GPUShaderStage.COMPUTE,
          buffer: { type: kind },
        })),
      });
      const pipeline = await scoped(device, `shaders[${i}] '${s.label}'`, () =>
        device.createComputePipelineAsync({
          label: s.label,
          layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
          compute: { module, entryPoint: s.entryPoint },
        }).catch((e) => fail(`shaders[${i}] '${s.label}': ${e.message}`)));
      this._pipelines.push({ pipeline, layout, shader: s });
    }
    // Uniforms: every dispatch's bytes in one buffer at aligned offsets. Writes: their
    // bytes in one buffer, copied from at their place in the step order.
    const align = device.limits.minUniformBufferOffsetAlignment;
    let uniformBytes = 0, writeBytes = 0;
    for (const s of m.steps) {
      if (s.kind === "dispatch" && s.uniforms) uniformBytes = Math.ceil(uniformBytes / align) * align + s.uniforms.size;
      if (s.kind === "write") writeBytes += s.data.size;
    }
    await scoped(device, "building the bundle's steps", () => {
      const uniforms = uniformBytes ? device.createBuffer({ size: round4(uniformBytes), usage: U.UNIFORM | U.COPY_DST }) : null;
      const writes = writeBytes ? device.createBuffer({ size: writeBytes, usage: U.COPY_SRC | U.COPY_DST }) : null;
      let u = 0, w = 0;
      this._steps = m.steps.map((s) => {
        if (s.kind === "copy")
          return { copy: [this._buffers[s.src], s.srcOffset, this._buffers[s.dst], s.dstOffset, s.size] };
        if (s.kind === "write") {
          device.queue.writeBuffer(writes, w, bin, s.data.offset, s.data.size);
          const step = { copy: [writes, w, this._buffers[s.dst], s.dstOffset, s.data.size] };
          w += s.data.size;
          return step;
        }
        const p = this._pipelines[s.shader];
        const entries = s.bindings.map((b, k) => ({ binding: k, resource: { buffer: this._buffers[b.buffer], offset: b.offset, size: b.size } }));
        if (s.uniforms) {
          u = Math.ceil(u / align) * align;
          device.queue.writeBuffer(uniforms, u, bin, s.uniforms.offset, s.uniforms.size);
          entries.push({ binding: entries.length, resource: { buffer: uniforms, offset: u, size: s.uniforms.size } });
          u += s.uniforms.size;
        }
        const group = device.createBindGroup({ layout: p.layout, entries });
        return { pipeline: p.pipeline, group, workgroups: s.workgroups };
      });
      // Read-back buffers, one per output, covering whole words.
      this._readbacks = m.outputs.map((t) => {
        const start = t.offset - (t.offset % 4);
        const size = Math.max(4, round4(t.offset + t.byteSize) - start);
        return { start, size, buffer: device.createBuffer({ size, usage: U.MAP_READ | U.COPY_DST }) };
      });
    });
    this._bin = null;
  }

  // Runs once: one typed array per input (the dtype's array type, the exact byte size);
  // resolves to one typed array per output. Runs queue behind each other.
  run(inputs) {
    const next = this._busy.then(() => this._run(inputs));
    this._busy = next.catch(() => {});
    return next;
  }

  async _run(inputs) {
    const { device, manifest: m } = this;
    if (!Array.isArray(inputs) || inputs.length !== m.inputs.length)
      fail(`the program takes ${m.inputs.length} inputs, got ${Array.isArray(inputs) ? inputs.length : typeof inputs}`);
    m.inputs.forEach((t, i) => {
      const x = inputs[i];
      const want = DTYPES[t.dtype];
      const desc = `${t.dtype}[${t.shape.join(", ")}]`;
      if (!(x instanceof want)) fail(`input ${i}: expected a ${want.name} for ${desc}, got ${x && x.constructor ? x.constructor.name : typeof x}`);
      if (x.byteLength !== t.byteSize) fail(`input ${i}: ${desc} needs ${t.byteSize} bytes (${t.byteSize / want.BYTES_PER_ELEMENT} elements), got ${x.byteLength}`);
    });
    return scoped(device, "running the bundle", async () => {
      m.inputs.forEach((t, i) => {
        let bytes = new Uint8Array(inputs[i].buffer, inputs[i].byteOffset, inputs[i].byteLength);
        if (bytes.byteLength % 4) {
          // Writes move whole words: the tail word's other bytes are this tensor's padding.
          const padded = new Uint8Array(round4(bytes.byteLength));
          padded.set(bytes);
          bytes = padded;
        }
        if (bytes.byteLength) device.queue.writeBuffer(this._buffers[t.buffer], t.offset, bytes);
      });
      const encoder = device.createCommandEncoder();
      let pass = null;
      for (const s of this._steps) {
        if (s.copy) {
          if (pass) pass.end();
          pass = null;
          encoder.copyBufferToBuffer(...s.copy);
          continue;
        }
        if (!pass) pass = encoder.beginComputePass();
        pass.setPipeline(s.pipeline);
        pass.setBindGroup(0, s.group);
        pass.dispatchWorkgroups(...s.workgroups);
      }
      if (pass) pass.end();
      m.outputs.forEach((t, i) => {
        const r = this._readbacks[i];
        encoder.copyBufferToBuffer(this._buffers[t.buffer], r.start, r.buffer, 0, r.size);
      });
      device.queue.submit([encoder.finish()]);
      await Promise.all(this._readbacks.map((r) => r.buffer.mapAsync(GPUMapMode.READ)));
      return m.outputs.map((t, i) => {
        const r = this._readbacks[i];
        const skip = t.offset - r.start;
        const bytes = new Uint8Array(r.buffer.getMappedRange()).slice(skip, skip + t.byteSize);
        r.buffer.unmap();
        return new DTYPES[t.dtype](bytes.buffer);
      });
    });
  }

  destroy() {
    for (const b of this._buffers || []) b.destroy();
    for (const r of this._readbacks || []) r.buffer.destroy();
  }
}
