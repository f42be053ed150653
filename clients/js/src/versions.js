// A message's later versions, a part of GwClient (client.js installs these methods on its
// prototype; `this` is the client): the user's edits and recalls of its own messages, and
// the `edited` and `recalled` that come back (the replies, and the pushes of the group's
// other sessions: other members, and this user's other tabs and devices).
// docs/PROTOCOL.md, Edits and recalls.
//
// What a client keeps is, per (gid, mid), the highest version seen (a `msg`, or a page
// entry without `ver`, is version 0): versions are pushed as they are committed and may
// overtake each other, or the `msg` they change. A held message (the group's view) is
// replaced by a later version of it; a version of a message not held (no view, a mid not
// pulled yet, or one trimmed away) is kept in its group's `versions`, and applied when
// the message comes. Only a version higher than what is known changes anything, and only
// such a version is reported ('edited', 'recalled' events).
//
// An edit names the version it makes (`ver`: the one known + 1), so that sending it again
// after a reconnect or a busy gateway is idempotent: the same version with the same body
// is answered again and stored once. An edit that names a version another edit made first
// (this user's other device) is refused with `conflict`: the promise is rejected, and the
// message is pulled again so that the next edit goes on top of that version.

import { asInt } from './util.js';

const CHANGE_RETRY_CODES = new Set(['overloaded', 'unavailable', 'internal', 'rate_limited']);
const CHANGE_MAX_RETRIES = 5;
// Later versions of messages not held, per group: the newest this many (a message pulled
// later comes with its latest version anyway; these cover the ones in flight meanwhile).
const VERSIONS_KEPT = 1000;

/** An Error with the protocol's code (or 'offline', 'disconnected'). */
function changeError(code, msg) {
  const e = new Error(msg ? `${code}: ${msg}` : code);
  e.code = code;
  return e;
}

/** The version a held message (or a page entry) is at: 0 when it has none. */
export const verOf = (m) => (m && m.ver ? m.ver : 0);

/** The held message m at version v ({ver, recalled, body}): a recall leaves no body and
 * no reactions. It keeps m's cseq (cursor.js): the caller says when it is complete at
 * the version's. */
function atVersion(m, v) {
  const out = { mid: m.mid, from: m.from, ts: m.ts, ver: v.ver, recalled: !!v.recalled };
  if (m.cseq) out.cseq = m.cseq;
  if (m.partial) out.partial = true;
  if (!v.recalled) {
    out.body = v.body;
    if (m.reactions) out.reactions = m.reactions;
    if (m.mine) out.mine = m.mine;
  }
  return out;
}

export const versionMethods = {
  // ---- public: edits and recalls ---------------------------------------------------

  /** Replace the body of the user's own message mid of gid. It names the version it
   * makes (the highest known + 1, counting this page's edits still on their way), so
   * that it is stored once however often it is sent: while offline it waits, and it is
   * sent again after a reconnect or a busy gateway. Resolves with the new version (also
   * reported as an 'edited' event); rejects with the gateway's code: unauthorized (not
   * the sender, or the edit window has passed), bad_field (no such message, or it was
   * recalled), conflict (another device made that version first: the message is pulled
   * again, edit again), not_member, too_large; or 'offline' once signed out. */
  edit(gid, mid, text) {
    mid = asInt(mid);
    if (!(mid >= 1)) return Promise.reject(changeError('bad_field', 'mid is a message id (1 or more)'));
    const size = new TextEncoder().encode(text).length;
    if (size > this.maxBody) return Promise.reject(changeError('too_large', `message too long: ${size} bytes, at most ${this.maxBody}`));
    return this.change({ t: 'edit', gid, mid, body: text, ver: this.nextVer(gid, mid) });
  },

  /** Recall (delete) the user's own message mid of gid, for everyone: it stays in the
   * group as a tombstone (`recalled`, no body). Resolves with the recall's version (also
   * reported as a 'recalled' event); rejects like edit. */
  recall(gid, mid) {
    mid = asInt(mid);
    if (!(mid >= 1)) return Promise.reject(changeError('bad_field', 'mid is a message id (1 or more)'));
    return this.change({ t: 'recall', gid, mid });
  },

  /** The highest version of message mid of gid this page knows (0: as sent, or not
   * known). */
  versionOf(gid, mid) {
    const g = this.groups.get(gid);
    return g ? this.knownVer(g, asInt(mid)) : 0;
  },

  // ---- internals ---------------------------------------------------------------------

  knownVer(g, mid) {
    const held = g.view ? g.view.held.get(mid) : undefined;
    const later = g.versions.get(mid);
    return Math.max(verOf(held), verOf(later));
  },

  /** The version an edit of (gid, mid) makes now: after the highest known, and after
   * this page's edits of it still on their way. */
  nextVer(gid, mid) {
    const g = this.groups.get(gid);
    let ver = g ? this.knownVer(g, mid) : 0;
    for (const c of this.changes.values()) {
      if (c.frame.gid === gid && c.frame.mid === mid && c.frame.ver) ver = Math.max(ver, c.frame.ver);
    }
    return ver + 1;
  },

  /** An edit or recall on its way: sent now when online, after the next welcome when not;
   * its promise settles with the reply. */
  change(frame) {
    return new Promise((resolve, reject) => {
      if (this.stopped) return reject(changeError('offline'));
      const c = { seq: ++this.changeSeq, frame, tries: 0, resolve, reject };
      this.changes.set(c.seq, c);
      if (this.state === 'online') this.transmitChange(c);
    });
  },

  transmitChange(c) {
    c.tries++;
    this.request(c.frame, { kind: c.frame.t, gid: c.frame.gid, mid: c.frame.mid, change: c });
  },

  /** After a welcome: the changes that got no reply are sent again, the same frame (an
   * edit keeps its ver: stored once). */
  resumeChanges() {
    for (const c of this.changes.values()) {
      if (this.groups.has(c.frame.gid)) this.transmitChange(c);
      else this.settleChange(c, null, changeError('not_member', 'not a member of this group'));
    }
  },

  /** A group this user is no longer in: its changes fail. */
  dropChanges(gid) {
    for (const c of [...this.changes.values()]) {
      if (c.frame.gid === gid) this.settleChange(c, null, changeError('not_member', 'not a member of this group'));
    }
  },

  /** Signed out: nothing more will be sent. */
  stopChanges() {
    for (const c of [...this.changes.values()]) this.settleChange(c, null, changeError('offline'));
  },

  settleChange(c, value, error) {
    if (this.changes.get(c.seq) !== c) return;
    this.changes.delete(c.seq);
    if (error) c.reject(error);
    else c.resolve(value);
  },

  /** An err answering an edit or recall: sent again later (the gateway is busy or cannot
   * store now), or the promise is rejected. */
  onChangeErr(info, code, msg, retryMs) {
    const c = info.change;
    if (!c || this.changes.get(c.seq) !== c) return;
    if (CHANGE_RETRY_CODES.has(code) && c.tries < CHANGE_MAX_RETRIES) {
      setTimeout(() => {
        if (this.changes.get(c.seq) === c && this.state === 'online') this.transmitChange(c);
      }, Math.max(asInt(retryMs), 500 * 2 ** (c.tries - 1)));
      return;
    }
    if (code === 'conflict' || code === 'bad_field') this.refreshMessage(info.gid, info.mid);
    if (code === 'not_member' || code === 'no_group') this.queueGroupsRefresh();
    this.settleChange(c, null, changeError(code, msg));
  },

  /** Pull one message again: its latest version (after a conflict, or an edit of a
   * message recalled meanwhile). */
  refreshMessage(gid, mid) {
    if (this.state !== 'online' || !this.groups.has(gid)) return;
    this.request({ t: 'pull', gid, before: mid + 1, limit: 1 }, { kind: 'refresh', gid, mid });
  },

  /** The page answering refreshMessage: a later version in it is kept. */
  onRefresh(m, info) {
    const g = this.groups.get(info.gid);
    if (!g) return;
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    for (const e of Array.isArray(m.msgs) ? m.msgs : []) {
      const msg = this.fromPage(e);
      if (msg.mid !== info.mid || msg.ver <= this.knownVer(g, msg.mid)) continue;
      if (g.view && g.view.held.has(msg.mid)) this.hold(g, msg);
      else this.keepVersion(g, { mid: msg.mid, ver: msg.ver, recalled: msg.recalled, body: msg.body });
    }
  },

  keepVersion(g, v) {
    g.versions.delete(v.mid); // the newest last: the oldest go first
    g.versions.set(v.mid, v);
    if (g.versions.size > VERSIONS_KEPT) g.versions.delete(g.versions.keys().next().value);
  },

  /** m, a message about to be held, at the highest version known of it. */
  latestOf(g, m) {
    const later = g.versions.get(m.mid);
    if (!later || verOf(later) <= verOf(m)) return m;
    const out = atVersion(m, later);
    out.partial = true; // what changed between m and that version is not known here
    return out;
  },

  // ---- incoming ----------------------------------------------------------------------

  /** `edited` or `recalled`: a reply to this page's request, or a push. */
  onVersion(m, info) {
    const v = { gid: String(m.gid), mid: asInt(m.mid), ver: asInt(m.ver), ts: asInt(m.ts), from: String(m.from), recalled: m.t === 'recalled' };
    if (!v.recalled) v.body = m.body;
    if (m.cseq !== undefined) v.cseq = asInt(m.cseq);
    if (info && info.change) this.settleChange(info.change, v, null);
    const g = this.groups.get(v.gid);
    if (!g) {
      if (!info) this.queueGroupsRefresh(); // a group this page does not list yet
      return;
    }
    const step = this.stepCursor(g, v.cseq || 0); // the change cursor (cursor.js)
    if (v.ver <= this.knownVer(g, v.mid)) return; // an older version, or one seen already
    this.keepVersion(g, { mid: v.mid, ver: v.ver, recalled: v.recalled, body: v.body });
    const held = g.view ? g.view.held.get(v.mid) : undefined;
    if (held) {
      const next = atVersion(held, v);
      // Complete at this cseq only when every change before it is applied to it.
      if (step === 'next' && !held.partial) {
        next.cseq = v.cseq;
        delete next.partial;
      } else if (v.cseq) next.partial = true;
      if (g.view.update(next)) this.markView(g.gid, { upserts: [this.entryOf(g.gid, next)] });
    }
    this.dispatchEvent(new CustomEvent(v.recalled ? 'recalled' : 'edited', { detail: v }));
  },
};
