// Reactions, a part of GwClient (client.js installs these methods on its prototype;
// `this` is the client): react() to a message with a short key (an emoji), and the
// `reacted` replies and pushes applied to the held messages. docs/PROTOCOL.md, Reactions.
//
// A held message keeps `reactions` ({key: count}, the keys with a count) and `mine` (the
// keys this user set), as its page entry or a `changes` entry gave them; a `reacted`
// with a cseq newer than the message's changes that key's count (and `mine` when it is
// this user's), by the cursor's rule (cursor.js). A recall drops them all.
//
// react() is idempotent on the gateway (setting a key set, or clearing one not set,
// changes nothing: `duplicate: true`), so it is sent like an edit: while offline it
// waits, and after a reconnect or a busy gateway it is sent again (versions.js, change).

import { asInt } from './util.js';

export const REACT_KEY_MAX = 32; // bytes of UTF-8 (ST_REACT_KEY_MAX)
export const REACT_KEYS_MAX = 20; // distinct keys a message may have (ST_REACT_KEYS_MAX)

const utf8 = new TextEncoder();

/** Why key is not a reaction key ('' when it is one): 1..32 bytes of UTF-8, no control
 * characters. */
export function reactKeyProblem(key) {
  if (typeof key !== 'string' || key === '') return 'key is a string of 1 to 32 bytes';
  const n = utf8.encode(key).length;
  if (n > REACT_KEY_MAX) return `key is ${n} bytes, at most ${REACT_KEY_MAX}`;
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'key has a control character';
  if (/[\ud800-\udfff]/.test(key.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''))) return 'key is not valid UTF-16 text';
  return '';
}

function reactError(code, msg) {
  const e = new Error(`${code}: ${msg}`);
  e.code = code;
  return e;
}

/** A message's reactions as a page or changes entry gives them: {key: count} (counts
 * above 0), and the reader's own keys. */
export function reactionsOf(e) {
  const out = {};
  if (e && e.reactions && typeof e.reactions === 'object' && !(e.reactions instanceof Uint8Array)) {
    for (const [k, c] of Object.entries(e.reactions)) if (asInt(c) > 0) out[k] = asInt(c);
  }
  const mine = Array.isArray(e && e.mine) ? e.mine.filter((k) => typeof k === 'string' && out[k] > 0) : [];
  return { reactions: out, mine };
}

/** The view's list of a message's reactions: [{key, count, mine}] by key. */
export function reactionList(m) {
  if (!m || m.recalled || !m.reactions) return [];
  const mine = new Set(m.mine || []);
  return Object.keys(m.reactions)
    .sort()
    .map((key) => ({ key, count: m.reactions[key], mine: mine.has(key) }));
}

export const reactionMethods = {
  // ---- public ------------------------------------------------------------------------

  /** Set (on: true) or clear (false) the user's reaction `key` on message mid of gid.
   * Resolves with the gateway's answer {gid, mid, uid, key, on, count, cseq, duplicate}
   * (also a 'reacted' event when it changed something); rejects with a GwRequestError:
   * bad_field (a bad key, no such message, or a recalled one), too_large (the message has
   * 20 keys already), not_member, rate_limited (after retries), or 'offline' once signed
   * out. While offline it waits for the reconnect. */
  react(gid, mid, key, on = true) {
    mid = asInt(mid);
    if (!(mid >= 1)) return Promise.reject(reactError('bad_field', 'mid is a message id (1 or more)'));
    const problem = reactKeyProblem(key);
    if (problem) return Promise.reject(reactError('bad_field', problem));
    return this.change({ t: 'react', gid, mid, key, on: !!on });
  },

  /** The reactions of a held message of gid: [{key, count, mine}] ([] when it has none
   * or is not held). */
  reactionsOf(gid, mid) {
    const g = this.groups.get(gid);
    const m = g && g.view ? g.view.held.get(asInt(mid)) : undefined;
    return reactionList(m);
  },

  // ---- incoming ----------------------------------------------------------------------

  /** `reacted`: the reply to react(), or a push (another member's, or this user's other
   * session). Applied to the held message when its cseq is newer than the message's. */
  onReacted(m, info) {
    const r = {
      gid: String(m.gid),
      mid: asInt(m.mid),
      uid: String(m.uid),
      key: String(m.key),
      on: m.on === true,
      count: asInt(m.count),
      cseq: asInt(m.cseq),
      duplicate: m.duplicate === true,
    };
    if (info && info.change) this.settleChange(info.change, r, null);
    const g = this.groups.get(r.gid);
    if (!g) {
      if (!info) this.queueGroupsRefresh();
      return;
    }
    if (r.duplicate) {
      // Nothing changed: its cseq is the message's, which says whether what is held is
      // behind (then a pull).
      this.heardCseq(g, r.cseq);
      if (g.cseq !== null && r.cseq > g.cseq) this.pullChanges(g, 'hole');
      return;
    }
    const step = this.stepCursor(g, r.cseq);
    const v = g.view;
    const held = v ? v.held.get(r.mid) : undefined;
    if (held && !held.recalled && r.cseq > (held.cseq || 0)) {
      const reactions = { ...(held.reactions || {}) };
      if (r.count > 0) reactions[r.key] = r.count;
      else delete reactions[r.key];
      const own = new Set(held.mine || []);
      if (r.uid === this.uid) {
        if (r.on) own.add(r.key);
        else own.delete(r.key);
      }
      const mine = [...own].filter((k) => reactions[k] > 0);
      const next = { ...held, reactions, mine };
      // Complete at this cseq only when every change before it is applied to it.
      if (step === 'next' && !held.partial) next.cseq = r.cseq;
      else next.partial = true;
      v.held.set(r.mid, next);
      this.markView(g.gid, { upserts: [this.entryOf(g.gid, next)] });
    } else if (held && r.cseq <= (held.cseq || 0)) {
      return; // already in what is held
    }
    this.dispatchEvent(new CustomEvent('reacted', { detail: r }));
  },
};
