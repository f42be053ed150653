// What members see of each other, a part of GwClient (client.js installs these methods
// on its prototype; `this` is the client): receipts of messages and the watch that keeps
// them current, who is online in a group, and who is typing (docs/PROTOCOL.md, Receipts,
// presence and typing). The reads that receipts count are in reads.js.
//
// The client keeps what the page shows: the receipts of the watched messages, each
// group's presence, who is typing (each forgotten after its ttl_ms), and after a
// reconnect it watches and subscribes again (the gateway forgets both with the session).

import { asInt } from './util.js';

const WATCH_MAX_GROUPS = 16; // protocol limits: groups watched by a session,
const WATCH_MAX_MIDS = 16; // and mids watched in one group
const TYPING_EVERY_MS = 2000; // the gateway drops a session's typing more often than this
const TYPING_TTL_MAX_MS = 60000; // a ttl_ms larger than this is taken as this

/** An Error with the protocol's code (or 'offline', 'disconnected'). */
function requestError(code, msg) {
  const e = new Error(msg ? `${code}: ${msg}` : code);
  e.code = code;
  return e;
}

function receiptOf(m) {
  const r = { gid: String(m.gid), mid: asInt(m.mid), delivered: asInt(m.delivered), read: asInt(m.read), of: asInt(m.of) };
  if (Array.isArray(m.readers)) r.readers = m.readers.map(String);
  return r;
}

export const peerMethods = {
  // ---- public: receipts --------------------------------------------------------------

  /** How many members hold message mid of gid (delivered), have seen it (read), of how
   * many; in a small group who read it (readers). Also reported as a 'receipts' event. */
  receipts(gid, mid) {
    return this.peerRequest({ t: 'receipts', gid, mid: asInt(mid) }, { kind: 'receipts', gid, mid: asInt(mid) });
  },

  /** Keep the receipts of these messages of gid current (the page's own messages on
   * screen): their receipts are asked for once, then 'receipts' events follow as members
   * move, at most one push a second. Up to 16 mids (the newest are kept) in up to 16
   * groups; watching again replaces the mids; an empty list is unwatch. */
  watch(gid, mids) {
    const list = [...new Set(mids.map(asInt).filter((m) => m >= 1))].sort((a, b) => a - b).slice(-WATCH_MAX_MIDS);
    if (!list.length) return this.unwatch(gid);
    let w = this.watches.get(gid);
    if (!w) {
      if (this.watches.size >= WATCH_MAX_GROUPS) throw new RangeError(`at most ${WATCH_MAX_GROUPS} groups are watched at a time`);
      this.watches.set(gid, (w = { mids: [], known: new Map() }));
    } else if (w.mids.join() === list.join()) return;
    const added = list.filter((m) => !w.mids.includes(m));
    for (const m of w.mids) if (!list.includes(m)) w.known.delete(m);
    w.mids = list;
    if (this.state !== 'online' || this.peersUnsupported) return; // sent after the welcome
    this.sendFrame({ t: 'watch', gid, mids: list });
    // A watch pushes only what moves from now on: where things are comes from asking.
    for (const mid of added) this.askReceipts(gid, mid);
  },

  /** Stop watching gid's receipts. */
  unwatch(gid) {
    if (!this.watches.delete(gid)) return;
    if (this.state === 'online' && !this.peersUnsupported) this.sendFrame({ t: 'watch', gid, mids: [] });
  },

  /** The last receipts known of a watched message (undefined before the first). */
  receiptsOf(gid, mid) {
    const w = this.watches.get(gid);
    return w ? w.known.get(mid) : undefined;
  },

  // ---- public: presence --------------------------------------------------------------

  /** Who of gid's members is online: counts, and in a small group each member with
   * online and lastSeen. subscribe: true keeps it current ('presence' events, also
   * after a reconnect), false stops that. */
  presence(gid, { subscribe } = {}) {
    if (subscribe !== undefined) {
      if (subscribe) this.presenceSubs.add(gid);
      else this.presenceSubs.delete(gid);
    }
    if (subscribe === false) this.presences.delete(gid);
    return this.peerRequest({ t: 'presence', gid, sub: subscribe === undefined ? undefined : !!subscribe }, { kind: 'presence', gid, unsub: subscribe === false });
  },

  /** The last presence known of gid (kept current while subscribed). */
  presenceOf(gid) {
    const s = this.presences.get(gid);
    return s ? this.presenceDetail(gid, s) : undefined;
  },

  // ---- public: typing ----------------------------------------------------------------

  /** The user is typing in gid: tells the group's other members, at most once every 2 s
   * (more often is dropped here, as the gateway would). True when it was sent. */
  typing(gid) {
    const at = Date.now();
    if (this.state !== 'online' || this.peersUnsupported) return false;
    if (at - (this.typingSentAt.get(gid) ?? -Infinity) < TYPING_EVERY_MS) return false;
    if (!this.sendFrame({ t: 'typing', gid })) return false;
    this.typingSentAt.set(gid, at);
    return true;
  },

  /** Who is typing in gid now (other users), in the order they started. */
  typingIn(gid) {
    const t = this.typers.get(gid);
    return t ? [...t.keys()] : [];
  },

  // ---- internals ---------------------------------------------------------------------

  /** A request whose reply settles a promise; rejected when it cannot be sent, when the
   * gateway answers err, or when the connection is lost before the reply. */
  peerRequest(obj, info) {
    return new Promise((resolve, reject) => {
      if (this.peersUnsupported) return reject(requestError('bad_type', 'this gateway does not know ' + obj.t));
      if (this.state !== 'online' || this.request(obj, { ...info, resolve, reject }) === null) reject(requestError('offline'));
    });
  },

  askReceipts(gid, mid) {
    this.request({ t: 'receipts', gid, mid }, { kind: 'receipts', gid, mid });
  },

  /** After a welcome: the gateway forgot the old session's watches and subscriptions. */
  resumePeers() {
    if (this.peersUnsupported) return;
    for (const [gid, w] of this.watches) {
      if (!this.groups.has(gid)) continue;
      this.sendFrame({ t: 'watch', gid, mids: w.mids });
      for (const mid of w.mids) this.askReceipts(gid, mid);
    }
    for (const gid of this.presenceSubs) {
      if (this.groups.has(gid)) this.request({ t: 'presence', gid, sub: true }, { kind: 'presence', gid });
    }
  },

  /** uid did something in gid (a message, typing, a cursor): a member. A subscribed
   * small group's list that lacks it is asked for again: the gateway's changes tell who
   * comes online or goes, not who joined the group meanwhile. */
  sawMember(gid, uid) {
    const s = this.presences.get(gid);
    if (!s || !s.members || s.members.has(uid) || s.askedFor.has(uid) || !this.presenceSubs.has(gid)) return;
    s.askedFor.add(uid); // once: an answer without it does not make a loop
    this.request({ t: 'presence', gid }, { kind: 'presence', gid });
  },

  /** A group this user is no longer in. */
  forgetPeers(gid) {
    this.watches.delete(gid);
    this.presenceSubs.delete(gid);
    this.presences.delete(gid);
    const t = this.typers.get(gid);
    if (t) for (const timer of t.values()) clearTimeout(timer);
    this.typers.delete(gid);
  },

  /** Signed out: nobody is typing any more, as far as this page knows. */
  stopPeers() {
    for (const t of this.typers.values()) for (const timer of t.values()) clearTimeout(timer);
    this.typers.clear();
  },

  /** The requests in flight are lost with the connection: their promises fail. */
  rejectInFlight() {
    for (const info of this.rids.values()) if (info.reject) info.reject(requestError('disconnected'));
  },

  /** An err answering receipts or presence. True when handled (no notice for it). */
  onPeerErr(info, code, msg) {
    if (code === 'bad_type') this.peersUnsupported = true; // an older gateway
    if (code === 'not_member' || code === 'no_group') this.queueGroupsRefresh();
    if (info.reject) info.reject(requestError(code, msg));
    return true;
  },

  // ---- incoming ----------------------------------------------------------------------

  onReceipts(m, info) {
    const r = receiptOf(m);
    const w = this.watches.get(r.gid);
    if (w && w.mids.includes(r.mid)) w.known.set(r.mid, r);
    if (info && info.resolve) info.resolve(r);
    this.dispatchEvent(new CustomEvent('receipts', { detail: r }));
  },

  /** A small group's cursors moved (each member that moved, where it is now). Who
   * counts for a watched message is asked again for those it may have changed: the
   * counts cannot be moved here, since a push does not say where a member was before. */
  onCursors(m) {
    const gid = String(m.gid);
    const cursors = (Array.isArray(m.cursors) ? m.cursors : []).map((c) => {
      const o = { uid: String(c.uid), ack: asInt(c.ack) };
      if (c.read !== undefined) o.read = asInt(c.read);
      return o;
    });
    this.dispatchEvent(new CustomEvent('cursors', { detail: { gid, cursors } }));
    for (const c of cursors) this.sawMember(gid, c.uid);
    const w = this.watches.get(gid);
    if (!w || !cursors.length) return;
    const reach = Math.max(...cursors.map((c) => Math.max(c.ack, c.read ?? 0)));
    for (const mid of w.mids) if (mid <= reach) this.askReceipts(gid, mid);
  },

  onPresence(m, info) {
    const gid = String(m.gid);
    const before = this.presences.get(gid);
    const s = { online: asInt(m.online), of: asInt(m.of), members: null, askedFor: before ? before.askedFor : new Set() };
    if (Array.isArray(m.members)) {
      s.members = new Map();
      for (const e of m.members) s.members.set(String(e.uid), { online: !!e.online, lastSeen: asInt(e.last_seen) });
    }
    const detail = this.presenceDetail(gid, s);
    if (!(info && info.unsub) && this.groups.has(gid)) this.presences.set(gid, s);
    if (info && info.resolve) info.resolve(detail);
    this.dispatchEvent(new CustomEvent('presence', { detail }));
  },

  /** Members of a subscribed group came online or went. */
  onOnline(m) {
    const gid = String(m.gid);
    const changes = (Array.isArray(m.changes) ? m.changes : []).map((c) => ({ uid: String(c.uid), online: !!c.online, lastSeen: asInt(c.last_seen) }));
    this.dispatchEvent(new CustomEvent('online', { detail: { gid, changes } }));
    const s = this.presences.get(gid);
    if (!s || !this.presenceSubs.has(gid)) return;
    if (!s.members) {
      // A large group: the counts cannot be moved from changes alone (one that came and
      // went within the second shows once, as it ended), so they are asked for again.
      this.request({ t: 'presence', gid }, { kind: 'presence', gid });
      return;
    }
    for (const c of changes) s.members.set(c.uid, { online: c.online, lastSeen: c.lastSeen });
    s.online = [...s.members.values()].filter((e) => e.online).length;
    s.of = Math.max(s.of, s.members.size);
    this.dispatchEvent(new CustomEvent('presence', { detail: this.presenceDetail(gid, s) }));
  },

  presenceDetail(gid, s) {
    const d = { gid, online: s.online, of: s.of };
    if (s.members) d.members = [...s.members].map(([uid, e]) => ({ uid, online: e.online, lastSeen: e.lastSeen }));
    return d;
  },

  onTyping(m) {
    const gid = String(m.gid);
    const uid = String(m.uid);
    if (uid === this.uid || !this.groups.has(gid)) return;
    this.sawMember(gid, uid);
    const ttl = Math.min(TYPING_TTL_MAX_MS, asInt(m.ttl_ms) || 5000);
    let t = this.typers.get(gid);
    if (!t) this.typers.set(gid, (t = new Map()));
    const known = t.has(uid);
    clearTimeout(t.get(uid));
    t.set(uid, setTimeout(() => this.stoppedTyping(gid, uid), ttl));
    if (!known) this.typingChanged(gid);
  },

  /** uid's typing expired, or a message from uid came (it was what was being typed). */
  stoppedTyping(gid, uid) {
    const t = this.typers.get(gid);
    if (!t || !t.has(uid)) return;
    clearTimeout(t.get(uid));
    t.delete(uid);
    if (!t.size) this.typers.delete(gid);
    this.typingChanged(gid);
  },

  typingChanged(gid) {
    this.dispatchEvent(new CustomEvent('typing', { detail: { gid, uids: this.typingIn(gid) } }));
  },
};
