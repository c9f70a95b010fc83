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
    if (hit && hit.error) throw new Error(hit.error);  // a shader that did not compile is not tried again
    if (hit) return hit;
    // Its own error scope: a shader that does not compile is this error,
    // not a validation error of whatever scope the caller has open.
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code, label: dispatch.shader });
    const info = await module.getCompilationInfo();
    await device.popErrorScope();
    const errors = info.messages.filter((m) => m.type === 'error');
    if (errors.length) {
      const m = errors[0];
      const error = `pass ${dispatch.pass} (${dispatch.name}): shader ${dispatch.shader} does not compile: ` +
                    `line ${m.lineNum}:${m.linePos}: ${m.message}`;
      cache.set(key, { error });
      throw new Error(error);
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

  // Encodes one dispatch of a plan: its uniforms as new buffers (added to
  // `made`, for the caller to destroy once the work is done), its storage
  // bindings as `bufferOf(id)` gives them.
  function encodeDispatch(device, pass, { pipeline, layout }, d, bufferOf, made) {
    const entries = d.bindings.map((b) => {
      if (b.type !== 'uniform') return { binding: b.binding, resource: { buffer: bufferOf(b.buffer) } };
      const u = device.createBuffer({ size: b.words.length * 4, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
      device.queue.writeBuffer(u, 0, new Uint32Array(b.words));
      made.push(u);
      return { binding: b.binding, resource: { buffer: u } };
    });
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, device.createBindGroup({ layout, entries }));
    if (d.workgroups.every((n) => n > 0)) pass.dispatchWorkgroups(...d.workgroups);
  }

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
        const aligned = bytes.length % 4 ? padded(bytes) : bytes;
        device.queue.writeBuffer(buf, 0, aligned);
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
      for (const [i, d] of plan.dispatches.entries())
        encodeDispatch(device, pass, compiled[i], d, (id) => buffers.get(id), made);
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

  // ---- whole steps (src/kernels/gpu_step.h) --------------------------------

  const STORAGE = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const POOL_MAX_BYTES = 256 * 1048576;  // free buffers kept between steps
  const GPU_WAIT_MS = 20000;  // the longest one wait of a step may take (a map, a compile)

  // What a device keeps between steps: weights by key (uploaded once),
  // session tensors by handle, and free buffers by size.
  const stepStates = new WeakMap();
  function stepState(device) {
    let st = stepStates.get(device);
    if (!st) {
      st = { weights: new Map(), handles: new Map(), nextHandle: 1, pool: new Map(), pooled: 0, lost: null };
      st.whenLost = device.lost.then((info) => { st.lost = info; });
      stepStates.set(device, st);
    }
    return st;
  }
  function toPool(st, buf) {
    if (st.pooled + buf.size > POOL_MAX_BYTES) return buf.destroy();
    if (!st.pool.has(buf.size)) st.pool.set(buf.size, []);
    st.pool.get(buf.size).push(buf);
    st.pooled += buf.size;
  }
  function fromPool(st, size) {
    const list = st.pool.get(size);
    if (!list || !list.length) return null;
    st.pooled -= size;
    return list.pop();
  }

  // A session let go of a tensor the GPU held: its buffer is free again.
  function releaseHandle(device, handle) {
    const st = stepState(device);
    const buf = st.handles.get(handle);
    if (!buf) return;
    st.handles.delete(handle);
    toPool(st, buf);
  }

  // Bytes as writeBuffer takes them: an unshared copy padded to 4 bytes.
  function padded(bytes) {
    const out = new Uint8Array(size4(bytes.length));
    out.set(bytes);
    return out;
  }

  // Runs a step program. `host` is the worker's side:
  //   value(id) → Uint8Array of the value's bytes on the CPU, or null
  //   put(id, ArrayBuffer)  a value read back (the CPU item or the answer needs it)
  //   runCpu(item)          runs CPU item `item` (its inputs are on the CPU); throws
  // Resolves to {retained: {name: handle}, ms, gpuItems, cpuItems, readBacks}.
  // A GPU item whose shader does not compile runs on the CPU instead (the
  // error is in `fellBack`).
  async function runStep(device, program, host) {
    const t0 = performance.now();
    const st = stepState(device);
    const lostError = () => new Error(`the GPU device was lost (${st.lost.reason}): ${st.lost.message}`);
    // Whatever the step waits for, a lost device ends the wait, and so does
    // silence: a map of a destroyed device may never settle, nor may the
    // device's lost promise (chromium, SwiftShader). Such a GPU is as good as lost.
    const unlessLost = (promise, what) => {
      let timer;
      const silence = new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`the GPU device was lost: no answer in ${GPU_WAIT_MS / 1000} s (${what})`)),
                           GPU_WAIT_MS);
      });
      return Promise.race([promise, silence, st.whenLost.then(() => { throw lostError(); })])
        .finally(() => clearTimeout(timer));
    };
    const values = program.values;
    const onGpu = new Map();
    const onHost = new Set();
    const taken = new Set();         // buffers from the pool (or new) for this step
    const freedNow = new Map();      // size -> buffers freed during this step: outputs only (see take)
    const uniforms = [];
    const fellBack = [];
    let encoder = null;
    let pass = null;
    let readBacks = 0;
    let cpuItems = 0;
    let gpuItems = 0;
    for (const [id, v] of Object.entries(values)) {
      if (v.handle !== undefined) {
        const buf = st.handles.get(v.handle);
        if (!buf) throw new Error(`session tensor ${id} is not on this GPU (handle ${v.handle})`);
        onGpu.set(id, buf);
      } else if (v.from !== 'node') {
        onHost.add(id);
      }
    }
    const lastUse = new Map();
    program.items.forEach((it, i) => it.in.forEach((id) => lastUse.set(id, i)));
    const kept = new Set([...program.outputs.map((o) => o.value), ...Object.values(program.retain)]);

    // A buffer freed during this step may still be read by commands encoded
    // but not yet submitted, and queue.writeBuffer lands before them: only a
    // GPU pass may write it again (its order is the encoder's).
    const take = (bytes, byGpu) => {
      const size = size4(bytes);
      let buf = null;
      if (byGpu && freedNow.has(size) && freedNow.get(size).length) buf = freedNow.get(size).pop();
      if (!buf) buf = fromPool(st, size) || device.createBuffer({ size, usage: STORAGE() });
      taken.add(buf);
      return buf;
    };
    const release = (buf) => {
      if (!freedNow.has(buf.size)) freedNow.set(buf.size, []);
      freedNow.get(buf.size).push(buf);
    };
    const free = (id) => {
      const buf = onGpu.get(id);
      if (!buf || !taken.has(buf) || kept.has(id)) return;
      onGpu.delete(id);
      release(buf);
    };
    const upload = (id) => {
      const v = values[id];
      if (!v) throw new Error(`the step has no value ${id}`);
      if (v.key && st.weights.has(v.key)) return onGpu.set(id, st.weights.get(v.key)).get(id);
      const bytes = onHost.has(id) ? host.value(id) : null;
      if (!bytes) throw new Error(`value ${id} is neither on the GPU nor on the CPU`);
      if (bytes.length !== v.bytes) throw new Error(`value ${id}: ${bytes.length} bytes, the step says ${v.bytes}`);
      let buf;
      if (v.key) {
        buf = device.createBuffer({ size: size4(v.bytes), usage: STORAGE() });
        st.weights.set(v.key, buf);
      } else {
        buf = take(v.bytes, false);
      }
      device.queue.writeBuffer(buf, 0, padded(bytes));
      onGpu.set(id, buf);
      return buf;
    };
    const readBack = async (ids) => {
      if (pass) { pass.end(); pass = null; }
      if (!encoder) encoder = device.createCommandEncoder();
      const reads = ids.map((id) => {
        const buf = onGpu.get(id);
        if (!buf) throw new Error(`value ${id} is neither on the GPU nor on the CPU`);
        const size = size4(values[id].bytes);
        const r = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
        encoder.copyBufferToBuffer(buf, 0, r, 0, size);
        return [id, r];
      });
      device.queue.submit([encoder.finish()]);
      encoder = null;
      for (const [id, r] of reads) {
        try {
          await unlessLost(r.mapAsync(GPUMapMode.READ), `reading ${id}`);
        } catch (err) {
          throw st.lost ? lostError() : new Error(`reading ${id}: ${err.message}`);
        }
        host.put(id, r.getMappedRange().slice(0, values[id].bytes));
        r.unmap();
        r.destroy();
        onHost.add(id);
        readBacks += 1;
      }
    };
    const runOnCpu = async (item, index) => {
      await readBack(item.in.filter((id) => !onHost.has(id)));
      host.runCpu(index);
      onHost.add(item.out);
      cpuItems += 1;
    };
    const runOnGpu = async (item) => {
      const compiled = [];
      for (const d of item.dispatches) compiled.push(await unlessLost(pipelineFor(device, program, d), `compiling ${d.shader}`));
      const local = new Map();
      for (const b of item.buffers) {
        if (b.kind === 'constant') {
          const buf = take(b.bytes, false);
          device.queue.writeBuffer(buf, 0, padded(new Uint8Array(new Uint32Array(b.words).buffer)));
          local.set(b.id, buf);
        } else if (b.kind === 'input') {
          local.set(b.id, onGpu.get(b.id) || upload(b.id));
        }
      }
      const out = take(values[item.out].bytes, true);
      local.set(item.out, out);
      if (!encoder) encoder = device.createCommandEncoder();
      if (!pass) pass = encoder.beginComputePass();
      for (const [i, d] of item.dispatches.entries()) {
        for (const b of d.bindings)
          if (b.type !== 'uniform' && !local.has(b.buffer))
            throw new Error(`node ${item.id}: binding ${b.name} names ${b.buffer}, which the step has no buffer for`);
        encodeDispatch(device, pass, compiled[i], d, (id) => local.get(id), uniforms);
      }
      for (const b of item.buffers) if (b.kind === 'constant') release(local.get(b.id));
      onGpu.set(item.out, out);
      gpuItems += 1;
    };

    device.pushErrorScope('validation');
    device.pushErrorScope('out-of-memory');
    let scopes = 2;
    try {
      for (const [index, item] of program.items.entries()) {
        if (st.lost) throw lostError();
        if (item.gpu) {
          try {
            await runOnGpu(item);
          } catch (err) {
            if (!/does not compile|shader/.test(err.message)) throw err;
            fellBack.push(`${item.id}: ${err.message}`);
            await runOnCpu(item, index);
          }
        } else {
          await runOnCpu(item, index);
        }
        for (const id of item.in) if (lastUse.get(id) === index) free(id);
        if (!lastUse.has(item.out)) free(item.out);
      }
      await readBack(program.outputs.map((o) => o.value).filter((id) => !onHost.has(id)));
      scopes = 0;
      const oom = await unlessLost(device.popErrorScope(), 'its error scope');
      const invalid = await unlessLost(device.popErrorScope(), 'its error scope');
      if (oom) throw new Error('the GPU is out of memory: ' + oom.message);
      if (invalid) throw new Error('WebGPU refused the step: ' + invalid.message);
      const retained = {};
      const adopted = new Set();
      for (const [name, id] of Object.entries(program.retain)) {
        const buf = onGpu.get(id);
        if (id.startsWith('s:') || !buf || !taken.has(buf) || adopted.has(buf)) continue;
        const handle = st.nextHandle++;
        st.handles.set(handle, buf);
        taken.delete(buf);
        adopted.add(buf);
        retained[name] = handle;
      }
      return { retained, ms: performance.now() - t0, gpuItems, cpuItems, readBacks, fellBack };
    } catch (err) {
      throw st.lost ? lostError() : err;
    } finally {
      while (scopes-- > 0) await unlessLost(device.popErrorScope(), 'its error scope').catch(() => {});
      if (pass) pass.end();
      for (const buf of taken) toPool(st, buf);
      for (const u of uniforms) u.destroy();
    }
  }

  root.BonfireWebGpu = { open, describe, runPlan, runStep, releaseHandle };
})(typeof self !== 'undefined' ? self : globalThis);
