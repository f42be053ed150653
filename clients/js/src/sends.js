// The user's messages on their way, a part of GwClient (client.js installs these methods
// on its prototype; `this` is the client): pending until `sent` gives them a mid, sent
// again with the same cid after a reconnect or a busy gateway, failed when refused.

import { asInt, now } from './util.js';

const SEND_RETRY_CODES = new Set(['overloaded', 'unavailable', 'internal', 'rate_limited']);
const SEND_MAX_RETRIES = 5;
// A send that the gateway has not answered this long, on a connection that is up, is
// late. The gateway answers `sent` once its store has committed the message (a few ms),
// so a late one says the store is slow or stuck (a database failing over: a commit in
// flight can hang for ~10 s before the gateway gives up on that connection), or else
// the path to the gateway is (the pings find that out). The page is told it is late,
// not why: the protocol has no signal for it.
export const SEND_LATE_MS = 3000;

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
    // sentAt: when it went out on this connection (0: not in flight); refused: the code
    // of the last refusal it is being sent again after (storeState reads both).
    const p = { cid: makeCid(), gid, body: text, state: 'pending', seq: ++this.sendSeq, tries: 0, code: null, sentAt: 0, refused: null };
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
    p.refused = null;
    this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
    if (this.state === 'online') this.transmitSend(p);
    this.checkStore();
  },

  discard(cid) {
    const p = this.pending.get(cid);
    if (!p || p.state !== 'failed') return;
    this.pending.delete(cid);
    this.markView(p.gid, { removes: ['p' + cid] });
    this.checkStore();
  },

  // ---- sending internals -------------------------------------------------------------

  transmitSend(p) {
    p.tries++;
    const rid = this.request({ t: 'send', gid: p.gid, cid: p.cid, body: p.body }, { kind: 'send', gid: p.gid, cid: p.cid });
    p.sentAt = rid === null ? 0 : now();
    this.checkStore();
  },

  /** What the user's messages on their way say of the gateway's store, kept in
   * storeState and reported as a 'store' event when it changes: 'unavailable' while one
   * is being sent again after the gateway refused it with `unavailable` (it cannot store
   * now: docs/PROTOCOL.md, Store trouble; a database down or failing over, a full disk),
   * 'slow' while one sent on this connection has had no answer for SEND_LATE_MS, else
   * 'ok'. Only while online: offline, the connection is what the page tells. Computed
   * from the pending sends each time one changes (and when the next one becomes late),
   * so it cannot stick: it is 'ok' again once they are stored, or have failed. Edits and
   * recalls are not counted: a message on its way is what the person waits for. */
  checkStore() {
    clearTimeout(this.lateTimer);
    this.lateTimer = null;
    let state = 'ok';
    let nextLate = Infinity;
    if (this.state === 'online') {
      const t = now();
      for (const p of this.pending.values()) {
        if (p.state !== 'pending') continue;
        if (p.refused === 'unavailable') state = 'unavailable';
        else if (p.sentAt && t - p.sentAt >= SEND_LATE_MS) {
          if (state === 'ok') state = 'slow';
        } else if (p.sentAt) nextLate = Math.min(nextLate, p.sentAt + SEND_LATE_MS);
      }
    }
    if (nextLate !== Infinity) this.lateTimer = setTimeout(() => this.checkStore(), nextLate - now() + 1);
    if (state === this.storeState) return;
    this.storeState = state;
    this.dispatchEvent(new CustomEvent('store', { detail: { state } }));
  },

  /** The connection is gone: nothing is in flight, and what the old one was refused is
   * not known of the next (resent after its welcome, each answered afresh). */
  resetSends() {
    for (const p of this.pending.values()) {
      p.sentAt = 0;
      p.refused = null;
    }
  },

  // ---- incoming ----------------------------------------------------------------------

  onSent(m) {
    const gid = String(m.gid);
    const cid = String(m.cid);
    const mid = asInt(m.mid);
    const p = this.pending.get(cid);
    this.pending.delete(cid);
    if (p) this.checkStore();
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
    p.sentAt = 0; // answered
    if (SEND_RETRY_CODES.has(code) && p.tries < SEND_MAX_RETRIES) {
      // The gateway is busy, stopping or cannot store now: the same cid again, later.
      p.refused = code;
      this.checkStore();
      setTimeout(() => {
        if (this.pending.get(p.cid) === p && p.state === 'pending' && this.state === 'online') this.transmitSend(p);
      }, 500 * 2 ** p.tries);
      return true;
    }
    p.state = 'failed';
    p.code = code;
    p.refused = null;
    this.checkStore();
    this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
    return false;
  },

  // ---- reporting changes -------------------------------------------------------------

  pendingEntry(p) {
    return { key: 'p' + p.cid, sort: 1e15 + p.seq, cid: p.cid, from: this.uid, ts: 0, text: p.body, binary: false, own: true, state: p.state, code: p.code, ver: 0, recalled: false };
  },
};
