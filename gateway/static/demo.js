// The demo page: pick a model and voice, speak text, hear it as it streams.
//
// Streamed formats (pcm, wav) are read from the response body chunk by chunk,
// turned into float32 samples and posted to an AudioWorklet (pcm-player.js) that
// plays them back to back. Other formats arrive as one file and play in <audio>.
// window.vocalisDemo holds the numbers of the last request, for people and tests.

"use strict";

const $ = (id) => document.getElementById(id);

const demo = (window.vocalisDemo = {
  models: [],
  requests: 0,
  busy: false,
  done: false,
  error: null,
  format: null,
  sampleRate: 0,
  ttfaMs: null,
  totalMs: null,
  audioSeconds: 0,
  rtf: null,
  samplesQueued: 0,
  samplesPlayed: 0,
  underruns: 0,
  playbackDone: false,
});

let audioContext = null;
let player = null;
let abort = null;

function errorText(response, body) {
  const message = body && body.error && body.error.message;
  return message ? `${response.status}: ${message}` : `HTTP ${response.status}`;
}

async function getJSON(url) {
  const response = await fetch(url);
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error(errorText(response, body));
  return body;
}

function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.className = isError ? "error" : "";
}

function render() {
  const fmt = (value, digits, unit) => (value === null || value === undefined ? "–" : `${value.toFixed(digits)}${unit}`);
  $("m-ttfa").textContent = fmt(demo.ttfaMs, 0, " ms");
  $("m-total").textContent = fmt(demo.totalMs === null ? null : demo.totalMs / 1000, 2, " s");
  $("m-audio").textContent = fmt(demo.audioSeconds || null, 2, " s");
  $("m-rtf").textContent = fmt(demo.rtf, 3, "");
  $("m-rate").textContent = demo.sampleRate ? `${demo.sampleRate} Hz` : "–";
  $("m-queued").textContent = String(demo.samplesQueued);
  $("m-played").textContent = String(demo.samplesPlayed);
  $("m-underruns").textContent = String(demo.underruns);
}

function selectedModel() {
  return demo.models.find((m) => m.id === $("model").value) || demo.models[0];
}

async function loadModels() {
  const body = await getJSON("/v1/models");
  demo.models = body.data;
  const select = $("model");
  select.innerHTML = "";
  for (const model of demo.models) {
    select.add(new Option(model.id, model.id, model.default, model.default));
  }
  await loadVoices();
}

// Show only the inputs the selected model honours, as its capabilities (GET /v1/models, GetModel) say.
function showModelFields() {
  const caps = (selectedModel() || {}).capabilities || {};
  const accepted = new Set(caps.accepted_fields || []);
  const required = new Set(caps.required_fields || []);
  $("speed-field").hidden = !accepted.has("speed");
  $("language-field").hidden = !accepted.has("language");
  const languages = $("languages");
  languages.innerHTML = "";
  for (const name of (caps.languages || []).slice(0, 200)) languages.append(new Option(name));
  $("instructions-field").hidden = !accepted.has("instructions");
  $("instructions-required").hidden = !required.has("instructions");
  $("clone-fields").hidden = !(caps.voice_cloning && accepted.has("ref_audio"));
  $("voice").disabled = !(caps.voices || []).length && !caps.voice_cloning;
}

async function loadVoices() {
  showModelFields();
  const model = selectedModel();
  const body = await getJSON(`/v1/audio/voices?model=${encodeURIComponent(model ? model.id : "")}`);
  const preferred = model && model.capabilities ? model.capabilities.default_voice : "";
  const select = $("voice");
  select.innerHTML = "";
  for (const name of body.voices) {
    select.add(new Option(name, name, name === preferred, name === preferred));
  }
}

// Must run inside the click handler, so that the browser lets the audio start.
function preparePlayer(rate) {
  if (!audioContext || audioContext.sampleRate !== rate) {
    if (audioContext) audioContext.close();
    audioContext = new AudioContext({ sampleRate: rate });
    player = audioContext.audioWorklet.addModule("/static/pcm-player.js").then(() => {
      const node = new AudioWorkletNode(audioContext, "pcm-player", { outputChannelCount: [1] });
      node.connect(audioContext.destination);
      node.port.onmessage = (event) => {
        demo.samplesPlayed = event.data.played;
        demo.underruns = event.data.underruns;
        demo.playbackDone = event.data.done;
        render();
      };
      return node;
    });
  }
  audioContext.resume();
  return player.then((node) => {
    node.port.postMessage({ type: "reset" });
    return node;
  });
}

// Bytes of a pcm or wav stream in, float32 samples out; keeps an odd byte and skips the WAV header.
class PcmDecoder {
  constructor(wav) {
    this.header = wav ? new Uint8Array(0) : null;
    this.carry = null;
  }

  push(bytes) {
    if (this.header !== null) {
      const joined = new Uint8Array(this.header.length + bytes.length);
      joined.set(this.header);
      joined.set(bytes, this.header.length);
      const start = PcmDecoder.dataStart(joined);
      if (start < 0) {
        this.header = joined;
        return new Float32Array(0);
      }
      this.header = null;
      bytes = joined.subarray(start);
    }
    if (this.carry !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.carry;
      joined.set(bytes, 1);
      bytes = joined;
      this.carry = null;
    }
    if (bytes.length % 2) {
      this.carry = bytes[bytes.length - 1];
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    const samples = new Float32Array(bytes.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
    return samples;
  }

  // Offset of the first sample of a RIFF/WAVE byte string, or -1 while the header is incomplete.
  static dataStart(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    let offset = 12;
    while (offset + 8 <= bytes.length) {
      const id = String.fromCharCode(...bytes.subarray(offset, offset + 4));
      if (id === "data") return offset + 8;
      offset += 8 + view.getUint32(offset + 4, true);
    }
    return -1;
  }
}

function readAsDataURL(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function requestBody(format) {
  const body = { input: $("text").value, model: $("model").value, response_format: format };
  if (!$("voice").disabled && $("voice").value) body.voice = $("voice").value;
  const speed = Number($("speed").value);
  if (!$("speed-field").hidden && speed && speed !== 1) body.speed = speed;
  if (!$("language-field").hidden && $("language").value.trim()) body.language = $("language").value.trim();
  if (!$("instructions-field").hidden && $("instructions").value.trim()) body.instructions = $("instructions").value.trim();
  const clip = $("ref-audio").files[0];
  if (!$("clone-fields").hidden && clip) {
    body.ref_audio = await readAsDataURL(clip);
    if ($("ref-text").value.trim()) body.ref_text = $("ref-text").value.trim();
    delete body.voice;
  }
  if (format === "pcm" || format === "wav") body.stream_format = "audio";
  return body;
}

async function speak() {
  stop();
  const format = $("format").value;
  const streamed = format === "pcm" || format === "wav";
  const model = selectedModel();
  Object.assign(demo, {
    requests: demo.requests + 1, busy: true, done: false, error: null, format, sampleRate: 0, ttfaMs: null, totalMs: null,
    audioSeconds: 0, rtf: null, samplesQueued: 0, samplesPlayed: 0, underruns: 0, playbackDone: false,
  });
  render();
  $("speak-button").disabled = true;
  $("stop-button").disabled = false;
  $("player").hidden = true;
  let node = streamed ? preparePlayer(model.capabilities.sample_rate) : null;
  abort = new AbortController();
  setStatus("synthesizing…");
  const start = performance.now();
  try {
    const response = await fetch("/v1/audio/speech", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(await requestBody(format)),
      signal: abort.signal,
    });
    if (!response.ok) throw new Error(errorText(response, await response.json().catch(() => null)));
    demo.sampleRate = Number(response.headers.get("X-Sample-Rate"));
    if (streamed && demo.sampleRate !== audioContext.sampleRate) node = preparePlayer(demo.sampleRate);
    const reader = response.body.getReader();
    const decoder = streamed ? new PcmDecoder(format === "wav") : null;
    const pieces = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (!value || value.length === 0) continue;
      if (demo.ttfaMs === null) demo.ttfaMs = performance.now() - start;
      if (!streamed) {
        pieces.push(value);
        continue;
      }
      const samples = decoder.push(value);
      if (samples.length === 0) continue;
      demo.samplesQueued += samples.length;
      demo.audioSeconds = demo.samplesQueued / demo.sampleRate;
      (await node).port.postMessage(samples, [samples.buffer]);
      render();
    }
    demo.totalMs = performance.now() - start;
    if (streamed) {
      (await node).port.postMessage({ type: "end" });
    } else {
      demo.audioSeconds = await playFile(new Blob(pieces, { type: response.headers.get("Content-Type") || "" }));
    }
    demo.rtf = demo.audioSeconds ? demo.totalMs / 1000 / demo.audioSeconds : null;
    setStatus(`done: ${demo.audioSeconds.toFixed(2)} s of ${format} audio`);
  } catch (error) {
    if (error.name === "AbortError") {
      setStatus("stopped");
    } else {
      demo.error = error.message;
      setStatus(error.message, true);
    }
  } finally {
    demo.busy = false;
    demo.done = true;
    abort = null;
    $("speak-button").disabled = false;
    $("stop-button").disabled = true;
    render();
  }
}

async function playFile(blob) {
  const audio = $("player");
  audio.hidden = false;
  audio.src = URL.createObjectURL(blob);
  await new Promise((resolve) => {
    audio.onloadedmetadata = resolve;
    audio.onerror = resolve;
  });
  audio.play().catch(() => {});
  return Number.isFinite(audio.duration) ? audio.duration : 0;
}

function stop() {
  if (abort) abort.abort();
  if (player) player.then((node) => node.port.postMessage({ type: "reset" }));
  $("player").pause();
}

async function upload(event) {
  event.preventDefault();
  const status = $("upload-status");
  status.className = "";
  status.textContent = "uploading…";
  try {
    const response = await fetch("/v1/audio/voices", { method: "POST", body: new FormData($("upload-form")) });
    const body = await response.json().catch(() => null);
    if (!response.ok) throw new Error(errorText(response, body));
    status.textContent = `uploaded: ${JSON.stringify(body)}`;
    await loadVoices();
  } catch (error) {
    status.className = "error";
    status.textContent = `upload failed: ${error.message}`;
  }
}

$("speak-button").addEventListener("click", speak);
$("stop-button").addEventListener("click", stop);
$("model").addEventListener("change", () => loadVoices().catch((error) => setStatus(error.message, true)));
$("upload-form").addEventListener("submit", upload);
render();
demo.ready = loadModels().then(
  () => true,
  (error) => {
    setStatus(`cannot load models: ${error.message}`, true);
    return false;
  },
);
