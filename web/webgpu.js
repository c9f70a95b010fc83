// WebGPU for the browser worker: the device as kernel packages see it, and a
// runner for the plans src/kernels/gpu_plan.h writes (buffers, WGSL,
// dispatches). The runner knows nothing of any package: it creates the
// buffers, compiles each shader once per device, binds what the plan says
// and dispatches in order, all in one submission, then reads the outputs.
//
// A classic script (the lend worker loads it with importScripts, a page with
// <script>): it defines self.BonfireWebGpu = {open, describe, runPlan}.
//
// Errors are Error objects whose message names what failed: a shader that
// does not compile names its template and pass and quotes the compiler's
// first message; a lost device says so and why. The caller then uses the CPU
// path (docs/KERNELS.md, "WebGPU").
(function (root) {
  'use strict';

  // Limits a package may read; the device is asked for the adapter's best.
  const LIMITS = [
    'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupSizeY',
    'maxComputeWorkgroupSizeZ', 'maxComputeWorkgroupStorageSize', 'maxComputeWorkgroupsPerDimension',
    'maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage',
    'maxUniformBufferBindingSize', 'minStorageBufferOffsetAlignment', 'minUniformBufferOffsetAlignment',
    'maxBindGroups', 'maxBindingsPerBindGroup', 'maxUniformBuffersPerShaderStage',
  ];
  // Features a package's `requires` or `when` may name.
  const FEATURES = ['subgroups', 'shader-f16', 'subgroup-size-control', 'chromium-experimental-subgroup-matrix',
                    'timestamp-query'];

  // {adapter, device, description} or {error}.
  async function open() {
    const gpu = root.navigator && root.navigator.gpu;
    if (!gpu) return { error: 'this browser offers no WebGPU (navigator.gpu is missing)' };
    let adapter;
    try {
      adapter = await gpu.requestAdapter();
    } catch (err) {
      return { error: 'requestAdapter failed: ' + err.message };
    }
    if (!adapter) return { error: 'the browser has WebGPU but no adapter' };
    const requiredLimits = {};
    for (const name of LIMITS) if (adapter.limits[name] !== undefined) requiredLimits[name] = adapter.limits[name];
    const requiredFeatures = FEATURES.filter((f) => adapter.features.has(f));
    let device;
    try {
      device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
    } catch (err) {
      return { error: 'requestDevice failed: ' + err.message };
    }
    return { adapter, device, description: describe(adapter, device) };
  }

  // The device in the form of devices/cpu.json (docs/KERNELS.md).
  function describe(adapter, device) {
    const info = adapter.info || {};
    const adapterInfo = {};
    for (const key of ['vendor', 'architecture', 'device', 'description']) adapterInfo[key] = String(info[key] || '');
    for (const key of ['subgroupMinSize', 'subgroupMaxSize'])
      if (typeof info[key] === 'number' && info[key] >= 1) adapterInfo[key] = info[key];
    if (Array.isArray(info.subgroupMatrixConfigs))
      adapterInfo.subgroupMatrixConfigs = info.subgroupMatrixConfigs.map((c) => ({
        componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K,
      }));
    if (typeof info.isFallbackAdapter === 'boolean') adapterInfo.isFallbackAdapter = info.isFallbackAdapter;
    const limits = {};
    for (const name of LIMITS) if (typeof device.limits[name] === 'number') limits[name] = device.limits[name];
    const name = ['webgpu', adapterInfo.vendor, adapterInfo.architecture].filter(Boolean).join('-');
    return {
      name,
      description: `WebGPU adapter ${adapterInfo.vendor || '?'} ${adapterInfo.architecture || ''}`.trim() +
        ' as the browser granted it (read by web/webgpu.js)',
      limits,
      features: [...device.features].filter((f) => FEATURES.includes(f)).sort(),
      adapterInfo,
    };
  }

  const pipelines = new WeakMap();  // device -> Map(shader text + layout -> {pipeline, layout})

  async function pipelineFor(device, plan, dispatch) {
    let cache = pipelines.get(device);
    if (!cache) pipelines.set(device, (cache = new Map()));
    const code = plan.shaders[dispatch.shader];
    if (code === undefined) throw new Error(`pass ${dispatch.pass}: the plan has no shader ${dispatch.shader}`);
    const types = dispatch.bindings.map((b) => b.type).join(',');
    const key = types + '\n' + code;
    const hit = cache.get(key);
    if (hit) return hit;
    const module = device.createShaderModule({ code, label: dispatch.shader });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) {
      const m = errors[0];
      throw new Error(`pass ${dispatch.pass} (${dispatch.name}): shader ${dispatch.shader} does not compile: ` +
                      `line ${m.lineNum}:${m.linePos}: ${m.message}`);
    }
    const layout = device.createBindGroupLayout({
      entries: dispatch.bindings.map((b) => ({
        binding: b.binding, visibility: GPUShaderStage.COMPUTE, buffer: { type: b.type },
      })),
    });
    device.pushErrorScope('validation');
    const pipeline = device.createComputePipeline({
      layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: 'main' },
      label: dispatch.shader,
    });
    const err = await device.popErrorScope();
    if (err) throw new Error(`pass ${dispatch.pass} (${dispatch.name}): shader ${dispatch.shader}: ${err.message}`);
    const entry = { pipeline, layout };
    cache.set(key, entry);
    return entry;
  }

  const size4 = (n) => Math.max(4, Math.ceil(n / 4) * 4);

  // Runs `plan` with `inputs` ({role: ArrayBuffer or typed array}); resolves
  // to {outputs: {role: ArrayBuffer}, ms}.
  async function runPlan(device, plan, inputs) {
    const t0 = performance.now();
    let lost = null;
    device.lost.then((info) => { lost = info; });
    const buffers = new Map();
    const made = [];
    const make = (size, usage) => {
      const b = device.createBuffer({ size, usage });
      made.push(b);
      return b;
    };
    try {
      for (const b of plan.buffers) {
        const buf = make(size4(b.bytes), GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC);
        buffers.set(b.id, buf);
        if (b.kind === 'constant') device.queue.writeBuffer(buf, 0, new Uint32Array(b.words));
        if (b.kind !== 'input') continue;  // outputs and intermediates start zeroed, as WebGPU creates them
        const data = inputs[b.id];
        if (!data) throw new Error(`input ${b.id} is missing`);
        const bytes = data instanceof ArrayBuffer ? new Uint8Array(data)
          : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        if (bytes.length !== b.bytes) throw new Error(`input ${b.id}: ${bytes.length} bytes, the plan needs ${b.bytes}`);
        const padded = bytes.length % 4 ? (() => { const p = new Uint8Array(size4(bytes.length)); p.set(bytes); return p; })() : bytes;
        device.queue.writeBuffer(buf, 0, padded);
      }
      // Every shader compiled before anything is encoded: a failure leaves
      // no error scope open.
      const compiled = [];
      for (const d of plan.dispatches) {
        for (const b of d.bindings)
          if (b.type !== 'uniform' && !buffers.has(b.buffer))
            throw new Error(`pass ${d.pass}: binding ${b.name} names ${b.buffer}, which the plan has no buffer for`);
        compiled.push(await pipelineFor(device, plan, d));
      }
      device.pushErrorScope('validation');
      device.pushErrorScope('out-of-memory');
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      for (const [i, d] of plan.dispatches.entries()) {
        const { pipeline, layout } = compiled[i];
        const entries = d.bindings.map((b) => {
          if (b.type === 'uniform') {
            const u = make(b.words.length * 4, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
            device.queue.writeBuffer(u, 0, new Uint32Array(b.words));
            return { binding: b.binding, resource: { buffer: u } };
          }
          return { binding: b.binding, resource: { buffer: buffers.get(b.buffer) } };
        });
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, device.createBindGroup({ layout, entries }));
        if (d.workgroups.every((n) => n > 0)) pass.dispatchWorkgroups(...d.workgroups);
      }
      pass.end();
      const reads = [];
      for (const b of plan.buffers) {
        if (b.kind !== 'output') continue;
        const read = make(size4(b.bytes), GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
        encoder.copyBufferToBuffer(buffers.get(b.id), 0, read, 0, size4(b.bytes));
        reads.push([b, read]);
      }
      device.queue.submit([encoder.finish()]);
      const oom = await device.popErrorScope();
      const invalid = await device.popErrorScope();
      if (oom) throw new Error('the GPU is out of memory: ' + oom.message);
      if (invalid) throw new Error('WebGPU refused the plan: ' + invalid.message);
      const outputs = {};
      for (const [b, read] of reads) {
        try {
          await read.mapAsync(GPUMapMode.READ);
        } catch (err) {
          throw new Error(lost ? `the GPU device was lost (${lost.reason}): ${lost.message}` : 'reading ' + b.id + ': ' + err.message);
        }
        outputs[b.id] = read.getMappedRange().slice(0, b.bytes);
        read.unmap();
      }
      return { outputs, ms: performance.now() - t0 };
    } catch (err) {
      if (lost) throw new Error(`the GPU device was lost (${lost.reason}): ${lost.message}`);
      throw err;
    } finally {
      for (const b of made) b.destroy();
    }
  }

  root.BonfireWebGpu = { open, describe, runPlan };
})(typeof self !== 'undefined' ? self : globalThis);
