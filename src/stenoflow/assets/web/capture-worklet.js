// Collects microphone samples (the AudioContext runs at 16 kHz) and posts them in 100 ms chunks.
class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.chunk = new Float32Array(1600);
    this.filled = 0;
  }

  process(inputs) {
    const channels = inputs[0];
    if (channels && channels.length > 0) {
      const mono = channels[0];
      for (let i = 0; i < mono.length; i++) {
        let v = 0;
        for (let c = 0; c < channels.length; c++) v += channels[c][i];
        this.chunk[this.filled++] = v / channels.length;
        if (this.filled === this.chunk.length) {
          this.port.postMessage(this.chunk.slice(0));
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor("capture-processor", CaptureProcessor);
