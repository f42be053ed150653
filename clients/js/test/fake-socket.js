// A WebSocket that a test plays the gateway for (client.test.js, changes.test.js): what the
// client sends is decoded and kept; the test pushes frames and drops the connection. And a
// client started over one, online.
// (Node's test runner loads this file too, as everything under test/: it has no tests.)
import { encode, decode } from '@msgpack/msgpack';
import { GwClient } from '../src/index.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class FakeSocket {
  static all = [];
  /** Error events the next sockets fail with (each an error event, then a close 1006)
   * instead of opening: what node's `ws` reports, or a browser's bare event. */
  static failNext = [];
  constructor(url, protocol) {
    this.url = url;
    this.protocol = protocol;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.all.push(this);
    queueMicrotask(() => {
      const fail = FakeSocket.failNext.shift();
      if (fail) {
        this.readyState = 3;
        this.onerror && this.onerror(fail);
        this.onclose && this.onclose({ code: 1006, reason: '' });
        return;
      }
      this.readyState = 1;
      this.onopen && this.onopen();
    });
  }
  send(bytes) {
    this.sent.push(decode(bytes));
  }
  close(code = 1000) {
    this.readyState = 3;
    this.onclose && this.onclose({ code, reason: '' });
  }
  /** The gateway sends one frame: a map, or an array of maps (a batch). */
  push(value) {
    const b = encode(value);
    this.onmessage({ data: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) });
  }
  drop(code = 1006) {
    this.readyState = 3;
    this.onclose({ code, reason: '' });
  }
  take(t) {
    const out = this.sent.filter((m) => m.t === t);
    this.sent = this.sent.filter((m) => m.t !== t);
    return out;
  }
}

/** A client started over a FakeSocket (the only one since), its hello answered with the
 * welcome frame given: the client, its socket, and the hellos it sent. */
export async function startOnline(welcome) {
  FakeSocket.all = [];
  const client = new GwClient({ url: 'ws://test/ws', getToken: async () => 'tok', WebSocketImpl: FakeSocket });
  client.start();
  await sleep(0);
  await sleep(0);
  const ws = FakeSocket.all[0];
  const hello = ws.take('hello');
  ws.push(welcome);
  return { client, ws, hello };
}
