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

// The error codes of node's TLS layer (OpenSSL's certificate verification results, and
// node's own host name check) that say the gateway's certificate was not accepted.
const CERT_ERROR_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE', 'UNABLE_TO_DECRYPT_CRL_SIGNATURE', 'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE', 'CRL_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID', 'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID', 'CRL_HAS_EXPIRED', 'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD', 'ERROR_IN_CRL_NEXT_UPDATE_FIELD', 'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED',
  'INVALID_CA', 'PATH_LENGTH_EXCEEDED', 'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED',
  'HOSTNAME_MISMATCH', 'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** The text of a TLS failure, e.g. 'self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)',
 * when err (what node's `ws` reports before a close) is one: the certificate was refused,
 * or the handshake failed (ERR_SSL_*, ERR_TLS_*, or an EPROTO from OpenSSL: e.g.
 * wss:// to a plain ws:// port, 'TLS handshake failed: wrong version number (EPROTO)').
 * Null for anything else, and for a browser's error event, which carries no detail. */
export function tlsFailure(err) {
  const code = err && typeof err === 'object' ? err.code : undefined;
  if (typeof code !== 'string') return null;
  const msg = String(err.message || '').trim();
  if (code === 'EPROTO') {
    // "write EPROTO 80...:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:file:line:"
    const ssl = /:SSL routines:[^:]*:([^:]+)/.exec(msg);
    return ssl ? `TLS handshake failed: ${ssl[1]} (${code})` : null;
  }
  if (!CERT_ERROR_CODES.has(code) && !/^ERR_(SSL|TLS)_/.test(code)) return null;
  return msg && msg !== code ? `${msg} (${code})` : code;
}

/** Opens a socket of WebSocketImpl (the browser's WebSocket, or one with its interface)
 * for the protocol's binary frames. on.open(), on.frame(Uint8Array), on.close(code,
 * reason, error) are called while the socket is current(ws) (the owner's test that it
 * has not replaced or dropped it); error is what the error event before the close
 * carried (node's `ws`: its Error, with a code), undefined when nothing (a browser).
 * Throws what the constructor throws (a malformed URL). */
export function openSocket(WebSocketImpl, url, current, on) {
  const ws = new WebSocketImpl(url, SUBPROTOCOL);
  let error;
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => {
    if (current(ws)) on.open();
  };
  ws.onmessage = (ev) => {
    if (!current(ws)) return;
    if (typeof ev.data === 'string') return; // the protocol has binary frames only
    on.frame(new Uint8Array(ev.data));
  };
  // A close event always follows, with the code; node's `ws` gives the Error here (its
  // ErrorEvent's `error`), a browser nothing.
  ws.onerror = (ev) => {
    if (ev && ev.error) error = ev.error;
  };
  ws.onclose = (ev) => {
    if (current(ws)) on.close(ev.code, ev.reason, error);
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
