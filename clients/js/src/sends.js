// The user's messages on their way, a part of GwClient (client.js installs these methods
// on its prototype; `this` is the client): pending until `sent` gives them a mid, sent
// again with the same cid after a reconnect or a busy gateway, failed when refused.

import { asInt } from './util.js';

const SEND_RETRY_CODES = new Set(['overloaded', 'unavailable', 'internal', 'rate_limited']);
const SEND_MAX_RETRIES = 5;

/** A client message id: random, so that it is unique per user across tabs and reloads
 * (the gateway remembers (uid, cid) for idempotent sends), and made only of characters
 * ids allow. getRandomValues works on plain http:// pages too, randomUUID does not. */
export function makeCid() {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return 'c' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

export const sendMethods = {
  // ---- public: sending ---------------------------------------------------------------

  /** Send a text message. It shows as pending until `sent` gives it its mid; while
   * offline it waits, and is sent (again) after each reconnect with the same cid, which
   * the gateway makes idempotent: stored once whatever happens to the connection. */
  send(gid, text) {
    const size = new TextEncoder().encode(text).length;
    if (size > this.maxBody) throw new Error(`message too long: ${size} bytes, at most ${this.maxBody}`);
    const p = { cid: makeCid(), gid, body: text, state: 'pending', seq: ++this.sendSeq, tries: 0, code: null };
    this.pending.set(p.cid, p);
    this.markView(gid, { upserts: [this.pendingEntry(p)] });
    if (this.state === 'online') this.transmitSend(p);
    return p.cid;
  },

  /** Try a failed message again (same cid). */
  retry(cid) {
    const p = this.pending.get(cid);
    if (!p || p.state !== 'failed') return;
    p.state = 'pending';
    p.code = null;
    p.tries = 0;
    this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
    if (this.state === 'online') this.transmitSend(p);
  },

  discard(cid) {
    const p = this.pending.get(cid);
    if (!p || p.state !== 'failed') return;
    this.pending.delete(cid);
    this.markView(p.gid, { removes: ['p' + cid] });
  },

  // ---- sending internals -------------------------------------------------------------

  transmitSend(p) {
    p.tries++;
    this.request({ t: 'send', gid: p.gid, cid: p.cid, body: p.body }, { kind: 'send', gid: p.gid, cid: p.cid });
  },

  // ---- incoming ----------------------------------------------------------------------

  onSent(m) {
    const gid = String(m.gid);
    const cid = String(m.cid);
    const mid = asInt(m.mid);
    const p = this.pending.get(cid);
    this.pending.delete(cid);
    const g = this.groups.get(gid);
    if (!g) return;
    g.lastMid = Math.max(g.lastMid, mid);
    if (g.view) {
      this.markView(gid, { removes: ['p' + cid] });
      // A pull may already have brought this mid (the message was stored, the `sent`
      // was lost with the connection, and the resend got the first `sent` back): then
      // it is already shown, once.
      if (p) this.hold(g, { mid, from: this.uid, ts: asInt(m.ts), ver: 0, recalled: false, body: p.body });
      this.advance(g);
    }
    this.markGroups();
  },

  /** An `err` answering a send: the message is sent again later (true: nothing to tell
   * the user yet), or it is marked failed. */
  onSendErr(cid, code) {
    const p = this.pending.get(cid);
    if (!p) return false;
    if (SEND_RETRY_CODES.has(code) && p.tries < SEND_MAX_RETRIES) {
      // The gateway is busy, stopping or cannot store now: the same cid again, later.
      setTimeout(() => {
        if (this.pending.get(p.cid) === p && p.state === 'pending' && this.state === 'online') this.transmitSend(p);
      }, 500 * 2 ** p.tries);
      return true;
    }
    p.state = 'failed';
    p.code = code;
    this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
    return false;
  },

  // ---- reporting changes -------------------------------------------------------------

  pendingEntry(p) {
    return { key: 'p' + p.cid, sort: 1e15 + p.seq, cid: p.cid, from: this.uid, ts: 0, text: p.body, binary: false, own: true, state: p.state, code: p.code, ver: 0, recalled: false };
  },
};
