// AudioWorklet processor: plays mono float32 PCM chunks back to back, without gaps.
//
// The page posts Float32Array chunks (at the AudioContext's rate) as they arrive from
// the network, then {type: "end"} after the last one. The processor copies queued
// samples into each 128-frame render quantum; when the queue runs dry before the
// end, it outputs silence and counts one underrun per dry spell. It reports what it
// has played to the page about ten times a second, and once more when done; after
// that it stays quiet until new samples come.

class PcmPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.queued = 0;
    this.played = 0;
    this.underruns = 0;
    this.dry = false;
    this.ended = false;
    this.finished = false;
    this.lastReport = 0;
    this.port.onmessage = (event) => {
      const data = event.data;
      if (data instanceof Float32Array) {
        this.queue.push(data);
        this.queued += data.length;
        this.finished = false;
      } else if (data && data.type === "end") {
        this.ended = true;
      } else if (data && data.type === "reset") {
        this.queue = [];
        this.offset = 0;
        this.queued = 0;
        this.played = 0;
        this.underruns = 0;
        this.dry = false;
        this.ended = false;
        this.finished = false;
      }
    };
  }

  process(inputs, outputs) {
    const channel = outputs[0][0];
    let written = 0;
    while (written < channel.length && this.queue.length > 0) {
      const chunk = this.queue[0];
      const n = Math.min(channel.length - written, chunk.length - this.offset);
      channel.set(chunk.subarray(this.offset, this.offset + n), written);
      written += n;
      this.offset += n;
      if (this.offset >= chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    channel.fill(0, written);
    this.played += written;
    const started = this.played > 0;
    if (written < channel.length && started && !this.ended) {
      if (!this.dry) this.underruns += 1;
      this.dry = true;
    } else if (written === channel.length) {
      this.dry = false;
    }
    if (this.ended && this.queue.length === 0 && !this.finished) {
      this.finished = true;
      this.report();
    } else if (!this.finished && currentTime - this.lastReport > 0.1) {
      this.report();
    }
    return true;
  }

  report() {
    this.lastReport = currentTime;
    this.port.postMessage({ queued: this.queued, played: this.played, underruns: this.underruns, done: this.finished });
  }
}

registerProcessor("pcm-player", PcmPlayer);
