// The page: loads site.json and the ONNX models (policy, env reset/step, render) into
// onnxruntime-web, plays episodes on the canvas (frames from the env's render; the
// observation as text for an env without one), and exposes
//   window.fxrl = { ready: Promise<void>,
//                   play(seed, maxSteps?): Promise<{return, length, actions}> }
// play(seed) is the greedy episode that fxrl.envs.make(env_id, auto_reset=False,
// episode_stats=False) starts with env.reset(fxrl.random.key(seed)), time limit kept.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  let site = null;  // site.json
  let sessions = null;  // {policy, reset, step, render?}

  // onnxruntime-web runs one session call at a time: every call goes through this queue.
  let queue = Promise.resolve();
  const serial = (fn) => {
    const result = queue.then(fn);
    queue = result.catch(() => {});
    return result;
  };

  // fxrl.random.key(seed): int64 [2] = the (high, low) 32-bit words of the 64-bit seed.
  function keyTensor(seed) {
    const s = BigInt.asIntN(64, BigInt(seed));
    const mask = 0xffffffffn;
    return new ort.Tensor("int64", BigInt64Array.of((s >> 32n) & mask, s & mask), [2]);
  }

  function checkSeed(seed) {
    if (!Number.isSafeInteger(seed)) {
      throw new TypeError(`fxrl.play: seed must be an integer, got ${seed}`);
    }
  }

  const scalar = (t) => Number(t.data[0]);

  // One env transition: {state: {state_<path>: Tensor}, obs, reward, done}.
  function unpack(out) {
    const state = {};
    for (const { name } of site.state) state[name] = out["next_" + name];
    return {
      state, obs: out.obs, reward: scalar(out.reward),
      done: Boolean(out.terminated.data[0]) || Boolean(out.truncated.data[0]),
    };
  }

  async function reset(seed) {
    return unpack(await sessions.reset.run({ key: keyTensor(seed) }));
  }

  // Greedy action of the policy for one observation: the env's action tensor.
  async function act(obs) {
    const input = sessions.policy.inputNames[0];
    const batched = new ort.Tensor(obs.type, obs.data, [1, ...obs.dims]);
    const out = (await sessions.policy.run({ [input]: batched }))[sessions.policy.outputNames[0]];
    const a = site.action;
    let data = out.data;
    if (out.type !== a.dtype) {  // e.g. an int32 argmax into an int64 Discrete action
      data = a.dtype === "int64" ? BigInt64Array.from(data, (v) => BigInt(v))
        : Float32Array.from(data, Number);
    }
    return new ort.Tensor(a.dtype, data, a.shape);
  }

  async function step(t) {
    const action = await act(t.obs);
    const next = unpack(await sessions.step.run({ ...t.state, action }));
    const values = Array.from(action.data, Number);
    next.action = values.length === 1 ? values[0] : values;
    return next;
  }

  async function play(seed, maxSteps = Infinity) {
    await api.ready;
    checkSeed(seed);
    if (!(maxSteps === Infinity || (Number.isSafeInteger(maxSteps) && maxSteps >= 0))) {
      throw new TypeError(`fxrl.play: maxSteps must be an integer >= 0, got ${maxSteps}`);
    }
    let t = await serial(() => reset(seed));
    let total = 0;
    const actions = [];
    while (!t.done && actions.length < maxSteps) {
      t = await serial(() => step(t));
      actions.push(t.action);
      total += t.reward;
    }
    return { return: total, length: actions.length, actions };
  }

  // ------------------------------------------------------------------------- drawing
  const canvas = $("screen");
  const ctx = canvas.getContext("2d");

  async function draw(t) {
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (sessions.render) {
      const frame = (await serial(() => sessions.render.run(t.state))).frame;
      const [h, w] = frame.dims;
      const rgba = new Uint8ClampedArray(w * h * 4);
      for (let i = 0; i < w * h; i++) {
        rgba.set(frame.data.subarray(3 * i, 3 * i + 3), 4 * i);
        rgba[4 * i + 3] = 255;
      }
      const image = await createImageBitmap(new ImageData(rgba, w, h));
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
      return;
    }
    ctx.fillStyle = "#222";
    ctx.font = "16px monospace";
    const obs = Array.from(t.obs.data, (v) => Number(v).toFixed(3));
    ctx.fillText(`obs [${obs.join(", ")}]`, 10, 30);
  }

  // ------------------------------------------------------------------------- the player
  const view = { t: null, steps: 0, total: 0, playing: false, timer: null, seed: 0, episode: 0 };

  function show(status = "") {
    $("step").textContent = String(view.steps);
    $("return").textContent = view.total.toFixed(2);
    $("status").textContent = status;
  }

  async function newEpisode() {
    const seed = Number($("seed").value);
    if (!Number.isSafeInteger(seed)) { show("(the seed must be an integer)"); return; }
    view.seed = seed;
    const episode = ++view.episode;  // a step of the previous episode still running is dropped
    const t = await serial(() => reset(seed));
    if (episode !== view.episode) return;
    view.t = t;
    view.steps = 0;
    view.total = 0;
    await draw(view.t);
    show();
  }

  async function tick() {
    view.timer = null;
    if (!view.playing) return;
    const started = performance.now();
    if (view.t.done) {  // the next seed, after a look at the last frame
      $("seed").value = String(view.seed + 1);
      await newEpisode();
    } else {
      const episode = view.episode;
      const t = await serial(() => step(view.t));
      if (episode !== view.episode) {  // "New episode" was pressed meanwhile
        view.timer = setTimeout(tick, 0);
        return;
      }
      view.t = t;
      view.steps += 1;
      view.total += view.t.reward;
      await draw(view.t);
      show(view.t.done ? "(episode over)" : "");
    }
    const speed = Number($("speed").value);
    const period = view.steps === 0 || view.t.done ? 1000 : 0;  // a look at first/last frames
    const wait = speed > 0 ? 1000 / (site.fps * speed) : 0;
    if (view.playing) {
      view.timer = setTimeout(tick, Math.max(0, Math.max(wait, period) - (performance.now() - started)));
    }
  }

  function setPlaying(on) {
    view.playing = on;
    $("play").textContent = on ? "Pause" : "Play";
    if (on && view.timer === null) view.timer = setTimeout(tick, 0);
  }

  async function load() {
    if (location.protocol === "file:") {
      const message = $("message");
      message.innerHTML = "This page runs its models with onnxruntime-web, which browsers " +
        "only allow over http. Serve this folder: <code>python -m http.server</code> in it, " +
        "then open <code>http://localhost:8000/</code>.";
      message.hidden = false;
      throw new Error("fxrl: opened from file://; serve the folder over http " +
        "(python -m http.server) and open http://localhost:8000/");
    }
    ort.env.wasm.numThreads = 1;  // threads need cross-origin isolation, which a plain server lacks
    ort.env.wasm.wasmPaths = new URL("./", location.href).href;
    // onnxruntime prints its warnings (e.g. a node it cannot constant-fold when loading) with
    // console.error: keep the console for errors.
    ort.env.logLevel = "error";
    site = await (await fetch("site.json")).json();
    const options = { executionProviders: ["wasm"], logSeverityLevel: 3 };  // 3: errors
    const open = (file) => ort.InferenceSession.create(file, options);
    const m = site.models;
    const [policy, reset_, step_, render] = await Promise.all(
      [m.policy, m.reset, m.step, m.render].map((f) => (f ? open(f) : null)));
    sessions = { policy, reset: reset_, step: step_, render };
    if (site.frame) {  // the render's aspect ratio, scaled by a whole factor up to 600 px wide
      const k = Math.max(1, Math.floor(600 / site.frame[1]));
      canvas.width = site.frame[1] * k;
      canvas.height = site.frame[0] * k;
    }
    const run = site.run;
    $("title").textContent = `${run ? run.algorithm : "policy"} on ${site.env_id}`;
    document.title = `fxrl: ${$("title").textContent}`;
    if (run && run.dir) {
      $("run").textContent = `run ${run.dir}, seed ${run.seed}, ${run.checkpoint} ` +
        `checkpoint at ${Number(run.steps).toLocaleString("en")} steps`;
    }
  }

  const api = { ready: null, play };
  api.ready = load();
  api.ready.catch(() => {});  // the file:// message is on the page; awaiting callers see it too
  window.fxrl = api;

  api.ready.then(async () => {
    await newEpisode();
    $("play").disabled = false;
    $("new").disabled = false;
    $("play").addEventListener("click", () => setPlaying(!view.playing));
    $("new").addEventListener("click", () => newEpisode());
  }, () => {});
})();
