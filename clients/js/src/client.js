// The protocol v1 client (docs/PROTOCOL.md), with no DOM in it: it composes the
// connection (connection.js) and a log per group (group-log.js) into what a page needs.
//
// What lives here, and why it is kept apart from the page: the rules a client has to get
// right whatever it looks like. The watermark of each group, dedup by (gid, mid), batched
// cumulative acks, filling holes, reacting to `notify`, re-sending pending messages with
// their cid, and reconnecting with backoff and jitter. app.js only draws what this module
// reports through events, and calls its methods when the user does something.
//
// Events (CustomEvent, `detail`):
//   'state'  {state, attempt, retryAt, reason, error?}  connection: connecting | online | offline | stopped;
//                                                 reason 'tls' (node): the gateway's certificate was
//                                                 refused, error its text (retried like the rest)
//   'store'  {state}                              what the user's sends say of the gateway's store:
//                                                 ok | unavailable (refused: it cannot store now) |
//                                                 slow (one unanswered for 3 s); sends.js
//   'groups' {}                                  the group list, counts or membership changed
//   'view'   {gid, reset, upserts, removes, meta} the messages of a group with a view changed
//   'notice' {kind, code, msg, gid}               something the user should be told (an error)
//   'auth'   {reason}                             the token was refused, or its session signed out by
//                                                 the application (4003), and no new one came
//   'joined' {gid}                                a join of this page was answered
//   'receipts' {gid, mid, delivered, read, of, readers?}  a receipts reply, or a watched message's push
//   'cursors' {gid, cursors}                      members of a watched small group moved
//   'presence' {gid, online, of, members?}        a group's presence: a reply, or changes applied
//   'online' {gid, changes}                       members of a subscribed group came online or went
//   'typing' {gid, uids}                          who is typing in a group now (one came, or stopped)
//   'edited' {gid, mid, ver, ts, from, body, recalled: false}  a later version of a message:
//                                                 a reply to edit(), or a push (only when newer
//                                                 than the version this page knew)
//   'recalled' {gid, mid, ver, ts, from, recalled: true}  a message recalled, likewise
//   'reacted' {gid, mid, uid, key, on, count, cseq, duplicate}  a reaction set or cleared: a
//                                                 reply to react(), or a push (reactions.js)
//   'changes' {gid, after, upto, entries, applied, gone}  a `changes` reply applied to what
//                                                 the group's view holds (cursor.js)
//
// This file is the class itself: its fields, the connection's life, the incoming frames.
// Its other parts are methods in files of their own, installed on the prototype at the
// end of this file: groups.js (the group list), views.js (a group's view, paging, acks),
// reads.js (what the person has seen), peers.js (receipts, presence, typing), sends.js
// (messages on their way), versions.js (edits and recalls: a message's later versions),
// cursor.js (the change cursor: changes to held messages caught up), reactions.js,
// tab-sync.js (the user's other tabs), batching.js (events once per task).

import { encode, decode } from '@msgpack/msgpack';
import {
  BACKOFF_RESET_AFTER_MS,
  CONNECT_TIMEOUT_MS,
  backoffDelay,
  Pinger,
  openSocket,
  closeSocket,
  tlsFailure,
} from './connection.js';
import { asInt, now } from './util.js';
import { groupMethods } from './groups.js';
import { viewMethods } from './views.js';
import { sendMethods } from './sends.js';
import { readMethods } from './reads.js';
import { peerMethods } from './peers.js';
import { versionMethods } from './versions.js';
import { cursorMethods } from './cursor.js';
import { reactionMethods } from './reactions.js';
import { openTabChannel, tabSyncMethods } from './tab-sync.js';
import { nothingDirty, batchingMethods } from './batching.js';

export { isValidId, bodyText } from './util.js';
export { makeCid } from './sends.js';

const SIGNED_OUT = 'signed out by the application'; // close 4003 (docs/API.md)

export class GwClient extends EventTarget {
  /**
   * @param {object} o
   * @param {string} o.url             ws:// or wss:// URL of /ws
   * @param {(opts:{refresh:boolean, signedOut:boolean}) => Promise<string>} o.getToken  a token; refresh:
   *   the last was refused, or (signedOut) its session signed out by the application (4003): a new one, or throw (or give none, or the
   *   same) to stop: the client never says hello with a spent token again
   * @param {typeof WebSocket} [o.WebSocketImpl]
   */
  constructor({ url, getToken, WebSocketImpl = globalThis.WebSocket }) {
    super();
    this.url = url;
    this.getToken = getToken;
    this.WebSocketImpl = WebSocketImpl;
    this.state = 'stopped';
    this.reason = '';
    this.error = undefined; // the TLS failure's text while reason is 'tls'
    this.ws = null;
    this.stopped = true;
    this.attempt = 0;
    this.retryAt = 0;
    this.retryTimer = null;
    this.connectTimer = null;
    this.pinger = new Pinger({
      ping: () => this.state === 'online' && this.request({ t: 'ping' }, { kind: 'ping' }) !== null,
      dead: () => this.noPong(),
    });
    this.onlineSince = 0;
    this.tokenRefusals = 0;
    this.token = null; // the token of the last hello
    this.spentToken = null; // refused, or its session signed out: never said again
    this.spentReason = '';
    // From `welcome`.
    this.uid = null;
    this.sid = null;
    this.ackEvery = 50;
    this.ackDelayMs = 1000;
    this.maxBody = 65536;
    this.groups = new Map(); // gid -> Group
    this.groupsPartial = false; // the last list left out a database's groups (groups.js)
    this.openGid = null;
    this.pending = new Map(); // cid -> {cid, gid, body, state, seq, tries, code, sentAt, refused}
    this.sendSeq = 0;
    this.storeState = 'ok'; // what the pending sends say of the gateway's store (sends.js)
    this.lateTimer = null;
    // Edits and recalls on their way (versions.js): seq -> {seq, frame, tries, resolve, reject}.
    this.changes = new Map();
    this.changeSeq = 0;
    // The change cursors (cursor.js): each `changes` reply applied, for the tests: {gid,
    // why, after, upto, last_cseq, entries, applied, more, gone}. An older gateway
    // answers `changes` with bad_type: not asked again on that connection.
    this.changeLog = [];
    this.changesUnsupported = false;
    this.nextRid = 1;
    this.rids = new Map(); // rid -> {kind, gid, cid}
    this.groupsRefreshQueued = false;
    // Reads (reads.js): one timer for all groups, as a read frame carries many.
    this.readTimer = null;
    this.readsUnsent = 0;
    // What members see of each other (peers.js).
    this.watches = new Map(); // gid -> {mids, known: mid -> receipts}
    this.presenceSubs = new Set(); // gids subscribed to, again after each welcome
    this.presences = new Map(); // gid -> {online, of, members: uid -> {online, lastSeen} | null}
    this.typers = new Map(); // gid -> uid -> the timer that forgets its typing
    this.typingSentAt = new Map(); // gid -> Date.now() of this page's last typing
    // An older gateway answers the new requests with bad_type: then they are not sent
    // on that connection (reads stay in this page).
    this.peersUnsupported = false;
    // Instrumentation, read by the tests and shown nowhere else: frames by type, each
    // ack frame with why it was sent and how many messages it covered.
    this.counters = { out: {}, in: {}, frames_in: 0, duplicates: 0, connects: 0 };
    this.ackLog = [];
    this.readLog = [];
    // Changes are collected and reported once per task, so that a batch frame of 256
    // messages redraws once, not 256 times.
    this.dirty = nothingDirty();
    // Other tabs of this browser signed in as the same user share acks through this
    // channel: the gateway shares acks per user, but does not tell the other sessions.
    this.channel = openTabChannel(this);
  }

  // ---- public: connection ----------------------------------------------------------

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    if (!this.channel) this.channel = openTabChannel(this); // closed by a stop before
    this.attempt = 0;
    this.connect();
  }

  /** Sign out: close for good (no reconnect). */
  stop() {
    // Once is enough: a `state` listener that stops the client on any state (its own
    // 'stopped' included) must not loop. But what the client holds goes in any case (a
    // client stopped by a refused token still held it): a Node process exits by itself.
    if (this.stopped && this.state === 'stopped') return this.release();
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.flushAcks(this.openGid ? [this.openGid] : [], 'leave');
    this.flushReads('leave');
    this.stopPeers();
    this.stopChanges();
    this.teardown(1000, 'signed out');
    this.release();
    this.setState('stopped', 'signed out');
  }

  /** Everything that would keep a process alive: the tab channel (a MessagePort in Node)
   * and every timer. start() opens the channel again. */
  release() {
    for (const t of ['retryTimer', 'connectTimer', 'lateTimer', 'readTimer']) {
      clearTimeout(this[t]);
      this[t] = null;
    }
    this.pinger.stop();
    this.stopPeers();
    for (const g of this.groups.values()) if (g.view) clearTimeout(g.view.ackTimer);
    if (this.channel) this.channel.close();
    this.channel = null;
  }

  /** Skip the rest of the backoff wait (a button, or the browser saying it is online). */
  reconnectNow() {
    if (this.stopped || this.state !== 'offline') return;
    clearTimeout(this.retryTimer);
    this.connect();
  }

  // ---- connection internals --------------------------------------------------------

  async connect() {
    if (this.stopped) return;
    this.setState('connecting', '');
    let token;
    try {
      token = await this.getToken({
        refresh: this.tokenRefusals > 0,
        signedOut: this.tokenRefusals > 0 && this.spentReason === SIGNED_OUT,
      });
    } catch (e) {
      if (this.tokenRefusals > 0) return this.authFailed(String(e.message || e));
      return this.scheduleReconnect('cannot get a token: ' + (e.message || e));
    }
    if (this.stopped) return;
    // A spent token would be refused again (docs/API.md, Revoking a user): the
    // application gave no new one, so the user is out.
    if (!token || token === this.spentToken) {
      return this.authFailed(this.spentReason || 'the application gave no token');
    }
    this.token = token;
    let ws;
    try {
      ws = openSocket(this.WebSocketImpl, this.url, (x) => this.ws === x, {
        open: () => this.sendFrame({ t: 'hello', token }),
        frame: (bytes) => this.onFrame(bytes),
        close: (code, reason, error) => this.onClosed(code, reason, error),
      });
    } catch (e) {
      return this.scheduleReconnect(String(e.message || e));
    }
    this.ws = ws;
    this.counters.connects++;
    this.connectTimer = setTimeout(() => {
      if (this.ws === ws && this.state !== 'online') this.teardown(4000, 'connect timeout');
    }, CONNECT_TIMEOUT_MS);
  }

  /** Close our socket without reconnecting from its close event. */
  teardown(code, reason) {
    const ws = this.ws;
    this.ws = null;
    this.clearConnTimers();
    if (!ws) return;
    closeSocket(ws, code, reason);
    this.resetInFlight();
    if (!this.stopped && code === 4000) this.scheduleReconnect(reason);
  }

  clearConnTimers() {
    clearTimeout(this.connectTimer);
    this.pinger.stop();
    this.connectTimer = null;
  }

  /** Requests in flight are lost with the connection: forget their rids. Pending sends
   * stay pending (sent again after `welcome`); pulls are made again by catchUp. */
  resetInFlight() {
    this.rejectInFlight();
    this.rids.clear();
    this.resetSends();
    this.resetCursors();
    for (const g of this.groups.values()) {
      if (!g.view) continue;
      g.view.fwdRid = null;
      g.view.olderRid = null;
      clearTimeout(g.view.ackTimer);
      g.view.ackTimer = null;
    }
  }

  onClosed(code, reason, error) {
    this.ws = null;
    this.clearConnTimers();
    this.resetInFlight();
    if (this.stopped) return;
    if (code === 4001 || code === 4003) {
      // Token refused (expired, revoked, or the gateway's secret changed), or the session
      // signed out by the application: that token is spent. Ask for a new one (refresh)
      // once or twice, then give up and ask the user to sign in again.
      this.spentToken = this.token;
      this.spentReason = code === 4003 ? SIGNED_OUT : 'the gateway refused the token';
      if (++this.tokenRefusals > 2) return this.authFailed(this.spentReason);
      return this.scheduleReconnect(this.spentReason);
    }
    // In node, the `ws` package tells why a connection failed: a certificate that is not
    // trusted is worth its own reason (it will not go away by itself). A browser's error
    // event says nothing: there it is a lost connection like any other.
    const tls = code === 1006 ? tlsFailure(error) : null;
    if (tls) return this.scheduleReconnect('tls', tls);
    // 4013: the gateway could not read the user's groups at `hello` (its database is
    // away, docs/PROTOCOL.md, Store trouble): retried with the backoff like the rest.
    const why =
      code === 1001 ? 'gateway restarting'
      : code === 1006 ? 'connection lost'
      : code === 4013 ? 'gateway waiting for its database'
      : `closed (${code}${reason ? ': ' + reason : ''})`;
    this.scheduleReconnect(why);
  }

  scheduleReconnect(reason, error) {
    if (this.stopped) return;
    if (this.onlineSince && now() - this.onlineSince > BACKOFF_RESET_AFTER_MS) this.attempt = 0;
    this.onlineSince = 0;
    const delay = backoffDelay(this.attempt++);
    this.retryAt = Date.now() + delay;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.setState('offline', reason, error);
  }

  authFailed(reason) {
    this.stopped = true;
    this.teardown(1000, 'auth');
    this.release();
    this.setState('stopped', reason);
    this.dispatchEvent(new CustomEvent('auth', { detail: { reason } }));
  }

  /** error: the text of what failed, for reason 'tls' (absent from the detail otherwise). */
  setState(state, reason, error) {
    this.state = state;
    this.reason = reason;
    this.error = error;
    this.checkStore(); // only online does it say anything
    const detail = { state, reason, attempt: this.attempt, retryAt: this.retryAt };
    if (error !== undefined) detail.error = error;
    this.dispatchEvent(new CustomEvent('state', { detail }));
  }

  armPing() {
    if (this.state === 'online') this.pinger.arm();
    else this.pinger.stop();
  }

  /** No answer to a ping: the path is gone though the socket looks open. */
  noPong() {
    const ws = this.ws;
    if (!ws) return;
    this.ws = null;
    this.clearConnTimers();
    closeSocket(ws, 4000, 'no pong');
    this.onClosed(1006, 'no answer to ping');
  }

  sendFrame(obj) {
    const ws = this.ws;
    if (!ws || ws.readyState !== 1) return false;
    // ignoreUndefined: an undefined field must not go out as nil (a wrong type).
    ws.send(encode(obj, { ignoreUndefined: true }));
    this.counters.out[obj.t] = (this.counters.out[obj.t] || 0) + 1;
    return true;
  }

  /** A request with a rid, so that its reply or error can be matched to what asked. */
  request(obj, info) {
    const rid = this.nextRid++;
    if (!this.sendFrame({ ...obj, rid })) return null;
    this.rids.set(rid, info);
    return rid;
  }

  // ---- incoming ----------------------------------------------------------------------

  onFrame(bytes) {
    this.counters.frames_in++;
    this.pinger.heard(); // anything that comes in shows the path is alive
    let v;
    try {
      v = decode(bytes);
    } catch (e) {
      console.warn('gw: undecodable frame dropped:', e.message);
      return;
    }
    // A server frame is one map, or an array of maps (a batch).
    for (const m of Array.isArray(v) ? v : [v]) {
      if (m && typeof m === 'object' && !(m instanceof Uint8Array)) this.dispatch(m);
    }
    this.ackIfCounted();
    if (this.state === 'online') this.armPing();
  }

  dispatch(m) {
    const t = m.t;
    this.counters.in[t] = (this.counters.in[t] || 0) + 1;
    const info = m.rid !== undefined ? this.rids.get(asInt(m.rid)) : undefined;
    if (m.rid !== undefined) this.rids.delete(asInt(m.rid));
    switch (t) {
      case 'welcome': return this.onWelcome(m);
      case 'groups': return this.applyGroupList(m.groups || [], false, m.partial === true);
      case 'joined': return this.onJoined(m);
      case 'left': return this.onLeft(String(m.gid));
      case 'sent': return this.onSent(m);
      case 'msg':
        this.stoppedTyping(String(m.gid), String(m.from)); // what was typed came
        this.sawMember(String(m.gid), String(m.from));
        return this.onMsg(m);
      case 'page': return this.onPage(m, info);
      case 'notify': return this.onNotify(m);
      case 'pong': return;
      case 'receipts': return this.onReceipts(m, info);
      case 'cursors': return this.onCursors(m);
      case 'presence': return this.onPresence(m, info);
      case 'online': return this.onOnline(m);
      case 'typing': return this.onTyping(m);
      case 'edited':
      case 'recalled':
        return this.onVersion(m, info);
      case 'reacted': return this.onReacted(m, info);
      case 'changes': return this.onChanges(m, info);
      case 'changed': return this.onChanged(m);
      case 'err': return this.onErr(m, info);
      default: return; // unknown types are ignored, like unknown keys
    }
  }

  onWelcome(m) {
    this.uid = String(m.uid);
    this.sid = m.sid;
    if (asInt(m.ack_every) > 0) this.ackEvery = asInt(m.ack_every);
    if (asInt(m.ack_delay_ms) > 0) this.ackDelayMs = asInt(m.ack_delay_ms);
    if (asInt(m.max_body) > 0) this.maxBody = asInt(m.max_body);
    clearTimeout(this.connectTimer);
    this.tokenRefusals = 0;
    this.peersUnsupported = false;
    this.changesUnsupported = false;
    this.onlineSince = now();
    this.setState('online', '');
    // Resume: the counts are the gateway's (login pulls nothing), the open group pulls
    // what it missed, and messages that never got their `sent` are sent again (same cid:
    // a message that was stored before the connection dropped is not stored twice).
    this.applyGroupList(m.groups || [], true, m.partial === true);
    for (const p of [...this.pending.values()].sort((a, b) => a.seq - b.seq)) {
      if (p.state === 'pending' && this.groups.has(p.gid)) this.transmitSend(p);
    }
    this.resumeChanges(); // edits, recalls and reactions that got no reply: the same frames again
    this.resumeCursors(); // changes missed while offline, before the views are current
    const g = this.groups.get(this.openGid);
    if (g && g.view) {
      if (g.view.w === null) this.sendEnter(g);
      else {
        this.flushAcks([g.gid], 'resume');
        this.catchUp(g);
      }
    }
    this.flushReads('resume'); // reads this page holds that the gateway has not
    this.resumePeers();
    this.armPing();
  }

  onErr(m, info) {
    const code = String(m.code || 'internal');
    const msg = String(m.msg || '');
    const gid = m.gid !== undefined ? String(m.gid) : info && info.gid;
    const kind = info ? info.kind : m.gid !== undefined ? 'ack' : 'unknown';
    if (info && (info.kind === 'receipts' || info.kind === 'presence')) return this.onPeerErr(info, code, msg);
    if (info && (info.kind === 'edit' || info.kind === 'recall' || info.kind === 'react')) return this.onChangeErr(info, code, msg, m.retry_ms);
    if (info && info.kind === 'changes' && this.onChangesErr(info, code, msg, m.retry_ms)) return;
    if (info && info.kind === 'repage') return this.onRepageErr(info, code);
    if (info && info.kind === 'refresh') return; // a message pulled again: nothing to tell
    if (!info && code === 'bad_type') {
      // Only frames without a rid that this gateway does not know get this: a read,
      // watch or typing sent to an older gateway. Not sent again on this connection.
      this.peersUnsupported = true;
      return;
    }
    if (info && info.kind === 'send') {
      if (this.onSendErr(info.cid, code)) return; // sent again later
    } else if (info && (info.kind === 'enter' || info.kind === 'after' || info.kind === 'before')) {
      const g = this.groups.get(info.gid);
      if (g && g.view) {
        if (info.kind === 'before') {
          g.view.olderRid = null;
          g.view.hasOlder = false;
        } else g.view.fwdRid = null;
        this.markView(info.gid);
      }
      if (code === 'not_member' || code === 'no_group') this.queueGroupsRefresh();
    } else if (kind === 'ack' || kind === 'leave') {
      // Acked or left a group this user is no longer in (left in another tab).
      if (code === 'not_member') this.queueGroupsRefresh();
    }
    if (kind === 'ack' && code === 'not_member') return; // handled quietly
    this.dispatchEvent(new CustomEvent('notice', { detail: { kind, code, msg, gid } }));
  }
}

// The other parts' methods, installed as the class's own are (not enumerable). A name
// defined in two places is a mistake: caught here rather than one silently replacing
// the other.
for (const methods of [groupMethods, viewMethods, readMethods, peerMethods, sendMethods, versionMethods, cursorMethods, reactionMethods, tabSyncMethods, batchingMethods]) {
  for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(methods))) {
    if (name in GwClient.prototype) throw new Error(`GwClient.${name} is defined twice`);
    Object.defineProperty(GwClient.prototype, name, { ...d, enumerable: false });
  }
}
