// The web demo: EfficientNet-Lite0 and all-MiniLM-L6-v2 as web bundles, run by
// web/player.js. Pictures are scaled to 224x224 and normalized with ImageNet's mean and
// std; the table shows the top-5 ImageNet class indices (class names are not shipped: no
// registry package has them). Two sentences are tokenized by wordpiece.js and embedded in
// one run (the program takes a batch of two); their vectors are unit length, so the
// similarity is their dot product.
import { loadBundle } from "../../web/player.js";
import { WordPiece } from "./wordpiece.js";

const BUNDLE = "efficientnet/web";
const MINILM = "minilm";
const MEAN = [0.485, 0.456, 0.406], STD = [0.229, 0.224, 0.225];
const $ = (id) => document.getElementById(id);
const canvas = $("canvas"), ctx = canvas.getContext("2d", { willReadFrequently: true });

function status(text, bad = false) {
  $("status").textContent = text;
  $("status").className = bad ? "bad" : "";
}

// RGBA pixels of the canvas -> float32 NCHW, normalized.
function canvasTensor() {
  const { data } = ctx.getImageData(0, 0, 224, 224);
  const x = new Float32Array(3 * 224 * 224);
  for (let i = 0; i < 224 * 224; ++i)
    for (let c = 0; c < 3; ++c) x[c * 224 * 224 + i] = (data[4 * i + c] / 255 - MEAN[c]) / STD[c];
  return x;
}

function top5(logits) {
  const max = Math.max(...logits);
  const exp = Array.from(logits, (v) => Math.exp(v - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  return [...exp.keys()].sort((a, b) => exp[b] - exp[a]).slice(0, 5).map((k) => ({ index: k, p: exp[k] / sum }));
}

let bundle = null;

async function classify(x) {
  const t0 = performance.now();
  const [logits] = await bundle.run([x]);
  const ms = performance.now() - t0;
  const best = top5(logits);
  $("top5").innerHTML = best.map((b) => `<tr><td>class ${b.index}</td><td>${(100 * b.p).toFixed(1)} %</td></tr>`).join("");
  status(`ran in ${ms.toFixed(0)} ms`);
  return { logits, best, ms };
}

function drawSample() {
  // A picture drawn here, so the demo runs without any file.
  const g = ctx.createLinearGradient(0, 0, 224, 224);
  g.addColorStop(0, "#6fa8dc");
  g.addColorStop(1, "#f6b26b");
  ctx.fillStyle = g;
  ctx.fillRect(0, 0, 224, 224);
  ctx.fillStyle = "#38761d";
  ctx.beginPath();
  ctx.arc(112, 130, 60, 0, 2 * Math.PI);
  ctx.fill();
}

// One frame of the camera, its centre square scaled to 224x224, classified.
async function classifyCamera() {
  const stream = await navigator.mediaDevices.getUserMedia({ video: true });
  try {
    const video = document.createElement("video");
    video.srcObject = stream;
    video.muted = true;
    await video.play();
    const side = Math.min(video.videoWidth, video.videoHeight);
    ctx.drawImage(video, (video.videoWidth - side) / 2, (video.videoHeight - side) / 2, side, side, 0, 0, 224, 224);
  } finally {
    stream.getTracks().forEach((t) => t.stop());
  }
  const x = canvasTensor();
  const { logits, best } = await classify(x);
  return { input: Array.from(x), logits: Array.from(logits), best };
}

// Runs the input make_bundle.py saved and compares with the engine's top-5 for it.
async function selfCheck() {
  const check = await (await fetch("efficientnet/check.json")).json();
  const x = new Float32Array(await (await fetch("efficientnet/" + check.input)).arrayBuffer());
  const { logits, best, ms } = await classify(x);
  const ours = best.map((b) => b.index);
  const same = ours.every((v, i) => v === check.engineTop5[i]);
  let maxDiff = 0;
  check.engineLogits.forEach((v, i) => { maxDiff = Math.max(maxDiff, Math.abs(v - logits[i])); });
  status(`self-check: top-5 ${same ? "equals" : "DIFFERS from"} the engine's (${check.engineTop5.join(", ")}); ` +
         `largest logit difference ${maxDiff.toExponential(2)}; ${ms.toFixed(0)} ms`, !same);
  return { top5: ours, engineTop5: check.engineTop5, cpuTop5: check.cpuTop5, maxDiff, ms };
}

let minilm = null, tokenizer = null, seq = 0;

function minilmStatus(text, bad = false) {
  $("similarity-status").textContent = text;
  $("similarity-status").className = bad ? "bad" : "";
}

// Cosine similarity of two sentences, with the token ids the program saw.
async function similarity(first, second) {
  const a = tokenizer.encode(first, seq), b = tokenizer.encode(second, seq);
  const ids = new BigInt64Array(2 * seq), mask = new BigInt64Array(2 * seq);
  ids.set(a.ids); ids.set(b.ids, seq);
  mask.set(a.mask); mask.set(b.mask, seq);
  const t0 = performance.now();
  const [vectors] = await minilm.run([ids, mask]);
  const ms = performance.now() - t0;
  const dim = vectors.length / 2;
  let dot = 0;
  for (let i = 0; i < dim; ++i) dot += vectors[i] * vectors[dim + i];
  $("similarity").textContent = `similarity ${dot.toFixed(4)}`;
  minilmStatus(`ran in ${ms.toFixed(0)} ms`);
  return { similarity: dot, ids: [Array.from(a.ids, Number), Array.from(b.ids, Number)], ms };
}

// The sentences make_bundle.py saved: our token ids against transformers', our
// similarity against the engine's and the CPU's.
async function minilmCheck() {
  const check = await (await fetch(MINILM + "/check.json")).json();
  const results = [];
  for (const pair of check.pairs) {
    const r = await similarity(...pair.sentences);
    const idsEqual = JSON.stringify(r.ids) === JSON.stringify(pair.ids);
    results.push({ sentences: pair.sentences, idsEqual, ids: r.ids, expectedIds: pair.ids, similarity: r.similarity,
                   engineSimilarity: pair.engineSimilarity, cpuSimilarity: pair.cpuSimilarity });
  }
  const worst = Math.max(...results.map((r) => Math.abs(r.similarity - r.cpuSimilarity)));
  const ok = results.every((r) => r.idsEqual) && worst < 1e-4;
  minilmStatus(`self-check: token ids ${results.every((r) => r.idsEqual) ? "equal" : "DIFFER from"} ` +
               `transformers'; largest similarity difference from the CPU ${worst.toExponential(2)}`, !ok);
  return results;
}

async function setupMinilm() {
  try {
    // An adapter gives one device; each bundle asks its own for the limits it needs.
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) throw new Error("no WebGPU adapter");
    const vocab = (await (await fetch(MINILM + "/vocab.txt")).text()).split("\n");
    if (vocab[vocab.length - 1] === "") vocab.pop();
    tokenizer = new WordPiece(vocab);
    seq = (await (await fetch(MINILM + "/check.json")).json()).seq;
    minilm = await loadBundle(adapter, MINILM + "/web");
  } catch (e) {
    return minilmStatus(`${e.message} (did you run examples/web/make_bundle.py?)`, true);
  }
  minilmStatus("ready");
  $("compare").onclick = () => similarity($("first").value, $("second").value);
  $("check-minilm").onclick = minilmCheck;
  return true;
}

async function main() {
  if (!navigator.gpu) return status("this browser has no WebGPU (navigator.gpu is missing)", true);
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return status("no WebGPU adapter", true);
  const t0 = performance.now();
  try {
    bundle = await loadBundle(adapter, BUNDLE);
  } catch (e) {
    return status(`${e.message} (did you run examples/web/make_bundle.py?)`, true);
  }
  status(`bundle loaded in ${(performance.now() - t0).toFixed(0)} ms`);
  $("file").onchange = async () => {
    const file = $("file").files[0];
    if (!file) return;
    const img = await createImageBitmap(file);
    ctx.drawImage(img, 0, 0, 224, 224);
    await classify(canvasTensor());
  };
  $("sample").onclick = async () => { drawSample(); await classify(canvasTensor()); };
  $("camera").onclick = () => classifyCamera().catch((e) => status(`camera: ${e.message}`, true));
  if (!navigator.mediaDevices) $("camera").disabled = true;  // not a secure context
  $("check").onclick = selfCheck;
  const minilmReady = await setupMinilm();
  window.demo = { selfCheck, minilmCheck, similarity, classifyCamera, minilmReady: minilmReady === true,
                  classifySample: async () => { drawSample(); return (await classify(canvasTensor())).best; } };
  window.demoReady = true;
}

main().catch((e) => status(e.message, true));
