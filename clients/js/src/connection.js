// The connection's rules: the subprotocol, the reconnect backoff, the ping, and the
// socket itself (opened for binary frames, closed without firing the owner's handlers).
// No protocol logic: client.js decides what to send and what a close means.

export const SUBPROTOCOL = 'gw.v1';

// Reconnect: exponential steps from 500 ms up to 15 s, each with "equal jitter" (half of
// the step fixed, half random). The jitter spreads the reconnects of many pages after a
// gateway restart so that they do not all arrive in the same instant; the fixed half
// keeps a page from hammering a gateway that is down.
const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 15000;
// A connection that stayed up this long starts the backoff from the first step again;
// one that drops sooner keeps climbing, so a gateway that accepts and then closes at
// once is not reconnected to in a tight loop.
export const BACKOFF_RESET_AFTER_MS = 10000;
export const CONNECT_TIMEOUT_MS = 10000; // socket opened and `welcome` received
// The gateway pings idle sessions itself (the browser answers those), but a page can
// only notice a dead network path by asking: an application ping when nothing came in.
export const PING_IDLE_MS = 25000;
export const PONG_TIMEOUT_MS = 10000;

/** Delay before reconnect attempt number `attempt` (0 = first). */
export function backoffDelay(attempt, random = Math.random) {
  const step = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.round(step / 2 + (random() * step) / 2);
}

/** Opens a socket of WebSocketImpl (the browser's WebSocket, or one with its interface)
 * for the protocol's binary frames. on.open(), on.frame(Uint8Array), on.close(code,
 * reason) are called while the socket is current(ws) (the owner's test that it has not
 * replaced or dropped it). Throws what the constructor throws (a malformed URL). */
export function openSocket(WebSocketImpl, url, current, on) {
  const ws = new WebSocketImpl(url, SUBPROTOCOL);
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => {
    if (current(ws)) on.open();
  };
  ws.onmessage = (ev) => {
    if (!current(ws)) return;
    if (typeof ev.data === 'string') return; // the protocol has binary frames only
    on.frame(new Uint8Array(ev.data));
  };
  ws.onerror = () => {}; // a close event always follows, with the code
  ws.onclose = (ev) => {
    if (current(ws)) on.close(ev.code, ev.reason);
  };
  return ws;
}

/** Closes ws with code and reason, its handlers detached first. */
export function closeSocket(ws, code, reason) {
  ws.onmessage = ws.onopen = null;
  ws.onclose = () => {};
  try {
    if (ws.readyState === 1) ws.close(code, reason);
    else if (ws.readyState === 0) ws.onopen = () => ws.close(code, reason); // closing a connecting socket logs a browser error
  } catch {
    /* already closed */
  }
}

/**
 * The application ping: after idleMs with nothing received, ping() is called (it sends
 * a `ping` request, or returns false when it cannot); if nothing at all comes within
 * pongMs after it, dead() is called (the path is gone though the socket looks open).
 */
export class Pinger {
  constructor({ ping, dead, idleMs = PING_IDLE_MS, pongMs = PONG_TIMEOUT_MS }) {
    this.ping = ping;
    this.dead = dead;
    this.idleMs = idleMs;
    this.pongMs = pongMs;
    this.idleTimer = null;
    this.pongTimer = null;
  }

  /** Something came in: the path is alive. */
  heard() {
    clearTimeout(this.pongTimer);
    this.pongTimer = null;
  }

  /** Starts (again) the wait for quiet. */
  arm() {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.ping()) this.pongTimer = setTimeout(() => this.dead(), this.pongMs);
    }, this.idleMs);
  }

  stop() {
    clearTimeout(this.idleTimer);
    clearTimeout(this.pongTimer);
    this.idleTimer = this.pongTimer = null;
  }
}
