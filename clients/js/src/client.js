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
//   'state'  {state, attempt, retryAt, reason}   connection: connecting | online | offline | stopped
//   'groups' {}                                  the group list, counts or membership changed
//   'view'   {gid, reset, upserts, removes, meta} the messages of a group with a view changed
//   'notice' {kind, code, msg, gid}               something the user should be told (an error)
//   'auth'   {reason}                             the token was refused and cannot be renewed
//   'joined' {gid}                                a join of this page was answered

import { encode, decode } from '@msgpack/msgpack';
import { GroupLog } from './group-log.js';
import {
  BACKOFF_RESET_AFTER_MS,
  CONNECT_TIMEOUT_MS,
  backoffDelay,
  Pinger,
  openSocket,
  closeSocket,
} from './connection.js';

const PAGE_LIMIT = 100; // messages per enter/pull (the server's default page)
const MAX_ACK_ENTRIES = 32; // per ack frame (protocol limit)
// A group view that is left keeps its newest messages in memory, so that coming back
// to it pulls only what arrived since (pull after the watermark) instead of everything.
const KEEP_WHEN_LEFT = 500;
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

export function isValidId(s) {
  return typeof s === 'string' && /^[A-Za-z0-9_.:-]{1,64}$/.test(s);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A body as text: bodies come back with the type the sender used (str or bin). */
export function bodyText(body) {
  if (typeof body === 'string') return { text: body, binary: false };
  if (body instanceof Uint8Array) {
    try {
      return { text: utf8.decode(body), binary: false };
    } catch {
      return { text: `[${body.length} bytes of binary data]`, binary: true };
    }
  }
  return { text: '', binary: true };
}

const asInt = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'bigint' ? Number(v) : 0);
const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

/** What this page knows of one group. */
class Group {
  constructor(gid) {
    this.gid = gid;
    this.lastMid = 0; // highest mid known to exist
    this.ack = 0; // highest ack known for this user: the server's, ours, or another tab's
    this.view = null; // a View once the group has been opened in this page
  }
}

/** A group that has been opened: its log (group-log.js), and the requests and the ack
 * timer that keep it filled and acked. */
class View extends GroupLog {
  constructor() {
    super();
    this.fwdRid = null; // the enter or pull-after in flight (one at a time)
    this.olderRid = null; // the pull-before in flight
    this.ackTimer = null;
  }
}

export class GwClient extends EventTarget {
  /**
   * @param {object} o
   * @param {string} o.url             ws:// or wss:// URL of /ws
   * @param {(opts:{refresh:boolean}) => Promise<string>} o.getToken  a token; refresh: the last was refused
   * @param {typeof WebSocket} [o.WebSocketImpl]
   */
  constructor({ url, getToken, WebSocketImpl = globalThis.WebSocket }) {
    super();
    this.url = url;
    this.getToken = getToken;
    this.WebSocketImpl = WebSocketImpl;
    this.state = 'stopped';
    this.reason = '';
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
    // From `welcome`.
    this.uid = null;
    this.sid = null;
    this.ackEvery = 50;
    this.ackDelayMs = 1000;
    this.maxBody = 65536;
    this.groups = new Map(); // gid -> Group
    this.openGid = null;
    this.pending = new Map(); // cid -> {cid, gid, body, state, seq, tries, code}
    this.sendSeq = 0;
    this.nextRid = 1;
    this.rids = new Map(); // rid -> {kind, gid, cid}
    this.groupsRefreshQueued = false;
    // Instrumentation, read by the tests and shown nowhere else: frames by type, each
    // ack frame with why it was sent and how many messages it covered.
    this.counters = { out: {}, in: {}, frames_in: 0, duplicates: 0, connects: 0 };
    this.ackLog = [];
    // Changes are collected and reported once per task, so that a batch frame of 256
    // messages redraws once, not 256 times.
    this.dirty = { groups: false, views: new Map(), scheduled: false };
    // Other tabs of this browser signed in as the same user share acks through this
    // channel: the gateway shares acks per user, but does not tell the other sessions.
    this.channel = typeof BroadcastChannel !== 'undefined' ? new BroadcastChannel('gw-demo') : null;
    if (this.channel) this.channel.onmessage = (ev) => this.onChannel(ev.data);
  }

  // ---- public: connection ----------------------------------------------------------

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.attempt = 0;
    this.connect();
  }

  /** Sign out: close for good (no reconnect). */
  stop() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.flushAcks(this.openGid ? [this.openGid] : [], 'leave');
    this.teardown(1000, 'signed out');
    this.setState('stopped', 'signed out');
    if (this.channel) this.channel.close();
    this.channel = null;
  }

  /** Skip the rest of the backoff wait (a button, or the browser saying it is online). */
  reconnectNow() {
    if (this.stopped || this.state !== 'offline') return;
    clearTimeout(this.retryTimer);
    this.connect();
  }

  // ---- public: groups ----------------------------------------------------------------

  /** Groups sorted by name, each with its unread count. */
  groupList() {
    return [...this.groups.values()]
      .sort((a, b) => (a.gid < b.gid ? -1 : a.gid > b.gid ? 1 : 0))
      .map((g) => ({ gid: g.gid, lastMid: g.lastMid, unread: this.unread(g), open: g.gid === this.openGid }));
  }

  /** Unread = messages after what the user has seen. For the open group that is its
   * watermark; for the others the ack (messages that arrived live while the group was
   * not open are held, but the user has not seen them). */
  unread(g) {
    let seen = g.ack;
    if (g.gid === this.openGid && g.view && g.view.w !== null) seen = Math.max(seen, g.view.w);
    return Math.max(0, g.lastMid - seen);
  }

  /** Join a group, creating it when it does not exist (open groups). */
  join(gid) {
    if (!isValidId(gid)) throw new Error('a group name is 1-64 characters of A-Z a-z 0-9 _ . : -');
    this.request({ t: 'join', gid }, { kind: 'join', gid });
  }

  leave(gid) {
    this.request({ t: 'leave', gid }, { kind: 'leave', gid });
  }

  refreshGroups() {
    if (this.state === 'online') this.request({ t: 'groups' }, { kind: 'groups' });
  }

  // ---- public: the group view ------------------------------------------------------

  /** Open a group's view. The first time: `enter` (pull after the stored ack, shared by
   * all sessions of the user); later: pull after this page's watermark. */
  open(gid) {
    if (this.openGid === gid) return;
    this.close();
    const g = this.groups.get(gid);
    if (!g) return;
    this.openGid = gid;
    if (!g.view) g.view = new View();
    const v = g.view;
    v.unacked = 0;
    v.firstUnread = null;
    this.markView(gid, { reset: true });
    if (v.w === null) {
      this.sendEnter(g);
    } else {
      // Messages that came live while the view was closed are seen now: ack them.
      this.flushAcks([gid], 'open');
      this.catchUp(g);
    }
    this.markGroups();
  }

  /** Leave the view (another group, back to the list, page hidden): ack at once. */
  close() {
    const gid = this.openGid;
    if (!gid) return;
    this.flushAcks([gid], 'leave');
    this.openGid = null;
    const g = this.groups.get(gid);
    if (g && g.view) g.view.trim(KEEP_WHEN_LEFT);
    this.markGroups();
  }

  /** Ack the open group now (the page is being hidden or unloaded). */
  flushOpen(reason = 'leave') {
    if (this.openGid) this.flushAcks([this.openGid], reason);
  }

  /** Older history of the open group: `pull before` the lowest mid shown. */
  loadOlder() {
    const g = this.groups.get(this.openGid);
    const v = g && g.view;
    if (!v || v.w === null || !v.hasOlder || v.olderRid !== null || this.state !== 'online') return false;
    const before = v.lowestShown();
    if (before <= 1) {
      v.hasOlder = false;
      this.markView(g.gid);
      return false;
    }
    v.olderRid = this.request({ t: 'pull', gid: g.gid, before, limit: PAGE_LIMIT }, { kind: 'before', gid: g.gid, view: v });
    this.markView(g.gid);
    return true;
  }

  /** Everything a view shows, sorted: stored messages by mid, then pending ones. */
  viewEntries(gid) {
    const g = this.groups.get(gid);
    const out = [];
    if (g && g.view) for (const m of g.view.held.values()) out.push(this.entryOf(gid, m));
    for (const p of this.pending.values()) if (p.gid === gid) out.push(this.pendingEntry(p));
    return out.sort((a, b) => a.sort - b.sort);
  }

  viewMeta(gid) {
    const g = this.groups.get(gid);
    const v = g && g.view;
    if (!v) return { hasOlder: false, loadingOlder: false, catchingUp: false, firstUnread: null, lastMid: g ? g.lastMid : 0 };
    return {
      hasOlder: v.hasOlder,
      loadingOlder: v.olderRid !== null,
      catchingUp: v.w === null || v.fwdRid !== null,
      firstUnread: v.firstUnread,
      lastMid: g.lastMid,
      w: v.w,
    };
  }

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
  }

  /** Try a failed message again (same cid). */
  retry(cid) {
    const p = this.pending.get(cid);
    if (!p || p.state !== 'failed') return;
    p.state = 'pending';
    p.code = null;
    p.tries = 0;
    this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
    if (this.state === 'online') this.transmitSend(p);
  }

  discard(cid) {
    const p = this.pending.get(cid);
    if (!p || p.state !== 'failed') return;
    this.pending.delete(cid);
    this.markView(p.gid, { removes: ['p' + cid] });
  }

  // ---- connection internals --------------------------------------------------------

  async connect() {
    if (this.stopped) return;
    this.setState('connecting', '');
    let token;
    try {
      token = await this.getToken({ refresh: this.tokenRefusals > 0 });
    } catch (e) {
      if (this.tokenRefusals > 0) return this.authFailed(String(e.message || e));
      return this.scheduleReconnect('cannot get a token: ' + (e.message || e));
    }
    if (this.stopped) return;
    let ws;
    try {
      ws = openSocket(this.WebSocketImpl, this.url, (x) => this.ws === x, {
        open: () => this.sendFrame({ t: 'hello', token }),
        frame: (bytes) => this.onFrame(bytes),
        close: (code, reason) => this.onClosed(code, reason),
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
    this.rids.clear();
    for (const g of this.groups.values()) {
      if (!g.view) continue;
      g.view.fwdRid = null;
      g.view.olderRid = null;
      clearTimeout(g.view.ackTimer);
      g.view.ackTimer = null;
    }
  }

  onClosed(code, reason) {
    this.ws = null;
    this.clearConnTimers();
    this.resetInFlight();
    if (this.stopped) return;
    if (code === 4001) {
      // Token refused (expired, or the gateway's secret changed): get a fresh one once
      // or twice, then give up and ask the user to sign in again.
      if (++this.tokenRefusals > 2) return this.authFailed('the gateway refused the token');
    }
    const why = code === 1001 ? 'gateway restarting' : code === 1006 ? 'connection lost' : `closed (${code}${reason ? ': ' + reason : ''})`;
    this.scheduleReconnect(why);
  }

  scheduleReconnect(reason) {
    if (this.stopped) return;
    if (this.onlineSince && now() - this.onlineSince > BACKOFF_RESET_AFTER_MS) this.attempt = 0;
    this.onlineSince = 0;
    const delay = backoffDelay(this.attempt++);
    this.retryAt = Date.now() + delay;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.setState('offline', reason);
  }

  authFailed(reason) {
    this.stopped = true;
    this.teardown(1000, 'auth');
    this.setState('stopped', reason);
    this.dispatchEvent(new CustomEvent('auth', { detail: { reason } }));
  }

  setState(state, reason) {
    this.state = state;
    this.reason = reason;
    this.dispatchEvent(new CustomEvent('state', { detail: { state, reason, attempt: this.attempt, retryAt: this.retryAt } }));
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
      case 'groups': return this.applyGroupList(m.groups || [], false);
      case 'joined': return this.onJoined(m);
      case 'left': return this.onLeft(String(m.gid));
      case 'sent': return this.onSent(m);
      case 'msg': return this.onMsg(m);
      case 'page': return this.onPage(m, info);
      case 'notify': return this.onNotify(m);
      case 'pong': return;
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
    this.onlineSince = now();
    this.setState('online', '');
    // Resume: the counts are the gateway's (login pulls nothing), the open group pulls
    // what it missed, and messages that never got their `sent` are sent again (same cid:
    // a message that was stored before the connection dropped is not stored twice).
    this.applyGroupList(m.groups || [], true);
    for (const p of [...this.pending.values()].sort((a, b) => a.seq - b.seq)) {
      if (p.state === 'pending' && this.groups.has(p.gid)) this.transmitSend(p);
    }
    const g = this.groups.get(this.openGid);
    if (g && g.view) {
      if (g.view.w === null) this.sendEnter(g);
      else {
        this.flushAcks([g.gid], 'resume');
        this.catchUp(g);
      }
    }
    this.armPing();
  }

  /** The list from `welcome` (the truth at login) or from `groups` (a refresh). */
  applyGroupList(list, isWelcome) {
    const seen = new Set();
    for (const e of list) {
      const gid = String(e.gid);
      seen.add(gid);
      let g = this.groups.get(gid);
      if (!g) this.groups.set(gid, (g = new Group(gid)));
      const lastMid = asInt(e.last_mid);
      const ack = asInt(e.ack);
      if (g.view && g.view.w !== null && lastMid < g.view.w) {
        // The gateway knows fewer messages than this page holds: its store was replaced
        // (a new data folder). What this page holds is not that group any more.
        g.view = g.gid === this.openGid ? new View() : null;
        g.lastMid = lastMid;
        g.ack = ack;
        if (g.view) {
          this.markView(gid, { reset: true });
          this.sendEnter(g);
        }
        continue;
      }
      g.lastMid = isWelcome ? Math.max(lastMid, g.view && g.view.w !== null ? g.view.w : 0) : Math.max(g.lastMid, lastMid);
      if (isWelcome) {
        // After a gateway crash the last batch of acks may be lost: start from what the
        // gateway has, and re-ack below if this page holds more.
        g.ack = ack;
        if (g.view) g.view.ackedTo = ack;
      } else {
        g.ack = Math.max(g.ack, ack);
      }
    }
    for (const gid of [...this.groups.keys()]) if (!seen.has(gid)) this.dropGroup(gid);
    this.markGroups();
  }

  onJoined(m) {
    const gid = String(m.gid);
    let g = this.groups.get(gid);
    if (!g) this.groups.set(gid, (g = new Group(gid)));
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    g.ack = Math.max(g.ack, asInt(m.ack));
    this.markGroups();
    this.broadcast({ kind: 'membership' });
    this.dispatchEvent(new CustomEvent('joined', { detail: { gid } }));
  }

  onLeft(gid) {
    this.dropGroup(gid);
    this.broadcast({ kind: 'membership' });
  }

  dropGroup(gid) {
    const g = this.groups.get(gid);
    if (!g) return;
    if (g.view) clearTimeout(g.view.ackTimer);
    if (this.openGid === gid) this.openGid = null;
    this.groups.delete(gid);
    for (const [cid, p] of this.pending) if (p.gid === gid) this.pending.delete(cid);
    this.markGroups();
    this.markView(gid, { reset: true });
  }

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
      if (p) this.hold(g, { mid, from: this.uid, ts: asInt(m.ts), body: p.body });
      this.advance(g);
    }
    this.markGroups();
  }

  onMsg(m) {
    const gid = String(m.gid);
    const g = this.groups.get(gid);
    if (!g) {
      // A push for a group this page does not list: another tab of this user joined it.
      this.queueGroupsRefresh();
      return;
    }
    const mid = asInt(m.mid);
    g.lastMid = Math.max(g.lastMid, mid);
    if (g.view) {
      this.hold(g, { mid, from: String(m.from), ts: asInt(m.ts), body: m.body });
      this.advance(g);
    }
    this.markGroups();
  }

  /** `notify`: the gateway dropped pushes for this page (it was too slow) and says where
   * the group is now. The open group pulls after its watermark; the others only count. */
  onNotify(m) {
    const g = this.groups.get(String(m.gid));
    if (!g) return this.queueGroupsRefresh();
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    if (g.gid === this.openGid) this.catchUp(g);
    this.markGroups();
  }

  onPage(m, info) {
    const gid = String(m.gid);
    const g = this.groups.get(gid);
    if (!g || !g.view || !info || !info.view) return;
    const v = g.view;
    const msgs = Array.isArray(m.msgs) ? m.msgs : [];
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    if (info.view !== v) return; // a reply to a view that has since been replaced
    if (info.kind === 'before') {
      v.olderRid = null;
      for (const e of msgs) this.hold(g, this.fromPage(e), true);
      v.hasOlder = msgs.length > 0 && !!m.more && v.lowestShown() > 1;
      this.markView(gid);
      return;
    }
    // enter or pull after.
    v.fwdRid = null;
    if (v.w === null) {
      // The first page of `enter` starts just after the user's ack: everything below
      // its first mid was read before (in this tab or another). An empty page means
      // nothing is unread: the ack is the group's last mid.
      v.w = msgs.length ? asInt(msgs[0].mid) - 1 : asInt(m.last_mid);
      v.ackedTo = Math.max(v.ackedTo, v.w);
      g.ack = Math.max(g.ack, v.w);
      v.firstUnread = msgs.length ? v.w + 1 : null;
      // Live pushes that came before this answer and are at or below the ack were read
      // in another tab: not shown here out of order; `pull before` brings them in order.
      const stale = [...v.held.keys()].filter((mid) => mid <= v.w);
      for (const mid of stale) v.held.delete(mid);
      if (stale.length) this.markView(gid, { removes: stale.map((mid) => 'm' + mid) });
      v.lowest = null;
      for (const mid of v.held.keys()) if (v.lowest === null || mid < v.lowest) v.lowest = mid;
    }
    for (const e of msgs) this.hold(g, this.fromPage(e));
    v.hasOlder = v.lowestShown() > 1;
    const before = v.w;
    this.advance(g, /* fromPage */ true);
    // Acking each page: the user has it on screen, and if the tab dies in the middle of
    // a long backlog the next visit starts after the pages already read.
    if (g.gid === this.openGid && v.w > v.ackedTo) this.flushAcks([gid], 'page');
    // More after this page, or live messages beyond a hole: pull on, one page at a time.
    // A page that brought nothing new does not pull again at once (no tight loop).
    if (v.w > before || msgs.length) this.catchUp(g);
    this.markView(gid);
    this.markGroups();
  }

  onErr(m, info) {
    const code = String(m.code || 'internal');
    const msg = String(m.msg || '');
    const gid = m.gid !== undefined ? String(m.gid) : info && info.gid;
    const kind = info ? info.kind : m.gid !== undefined ? 'ack' : 'unknown';
    if (info && info.kind === 'send') {
      const p = this.pending.get(info.cid);
      if (p) {
        if (SEND_RETRY_CODES.has(code) && p.tries < SEND_MAX_RETRIES) {
          // The gateway is busy, stopping or cannot store now: the same cid again, later.
          setTimeout(() => {
            if (this.pending.get(p.cid) === p && p.state === 'pending' && this.state === 'online') this.transmitSend(p);
          }, 500 * 2 ** p.tries);
          return;
        }
        p.state = 'failed';
        p.code = code;
        this.markView(p.gid, { upserts: [this.pendingEntry(p)] });
      }
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

  // ---- the watermark, dedup, holes, acks ---------------------------------------------

  fromPage(e) {
    return { mid: asInt(e.mid), from: String(e.from), ts: asInt(e.ts), body: e.body };
  }

  /** Keep a message unless it is already held ((gid, mid) is the dedup key: GroupLog). */
  hold(g, m, older = false) {
    const r = g.view.hold(m, older);
    if (r === 'duplicate') this.counters.duplicates++;
    if (r !== 'held') return false;
    this.markView(g.gid, { upserts: [this.entryOf(g.gid, m)] });
    return true;
  }

  /** Move the watermark over every contiguous message now held. In the open view that is
   * what the user sees, so it counts toward the next ack; a live mid beyond a hole
   * leaves the watermark where it is and the hole is pulled. */
  advance(g, fromPage = false) {
    const v = g.view;
    if (v.w === null) return; // enter has not answered yet: nothing to measure against
    const n = v.advance();
    if (v.w > g.lastMid) g.lastMid = v.w;
    if (g.gid !== this.openGid) return;
    if (n && !fromPage) this.countUnacked(g, n);
    if (!fromPage) this.catchUp(g);
  }

  /** Batched ack, as the protocol asks: after ack_every new messages, or ack_delay_ms
   * after the first unacked one, whichever comes first. The count is checked once per
   * incoming frame (ackIfCounted), so a batch frame of 256 pushes gives one ack, not five. */
  countUnacked(g, n) {
    const v = g.view;
    v.countUnacked(n, now());
    if (!v.ackTimer && !v.ackDueByCount(this.ackEvery)) {
      v.firstUnackedAt = now();
      v.ackTimer = setTimeout(() => {
        v.ackTimer = null;
        this.flushAcks([g.gid], 'delay');
      }, this.ackDelayMs);
    }
  }

  ackIfCounted() {
    const g = this.groups.get(this.openGid);
    if (g && g.view && g.view.ackDueByCount(this.ackEvery)) this.flushAcks([g.gid], 'count');
  }

  /** Send one ack frame for these groups: each at its contiguous watermark. */
  flushAcks(gids, reason) {
    const entries = [];
    for (const gid of gids) {
      const g = this.groups.get(gid);
      const v = g && g.view;
      if (!v || v.w === null) continue;
      clearTimeout(v.ackTimer);
      v.ackTimer = null;
      const to = v.ackTarget();
      if (!to) {
        v.unacked = 0;
        continue;
      }
      entries.push({ g, v, from: v.ackedTo, to, covered: v.unacked, waited: v.firstUnackedAt ? now() - v.firstUnackedAt : 0 });
    }
    if (!entries.length || this.state !== 'online') return; // offline: re-acked after welcome
    for (let i = 0; i < entries.length; i += MAX_ACK_ENTRIES) {
      const chunk = entries.slice(i, i + MAX_ACK_ENTRIES);
      const acks = {};
      for (const e of chunk) acks[e.g.gid] = e.to;
      if (!this.sendFrame({ t: 'ack', acks })) return;
      for (const e of chunk) {
        e.v.acked(e.to);
        e.g.ack = Math.max(e.g.ack, e.to);
      }
      if (this.ackLog.length > 2000) this.ackLog.splice(0, 1000);
      this.ackLog.push({
        at: now(),
        reason,
        acks,
        messages: chunk.reduce((s, e) => s + (e.to - e.from), 0),
        waited: Math.max(...chunk.map((e) => e.waited)),
      });
      this.broadcast({ kind: 'ack', acks });
    }
    this.markGroups();
  }

  /** Pull after the watermark when the open group has messages this page lacks: more
   * pages of a backlog, a hole in live mids, a `notify`, or what was missed while
   * offline. One forward pull at a time; each reply calls this again. */
  catchUp(g) {
    const v = g.view;
    if (!v || g.gid !== this.openGid || this.state !== 'online') return;
    if (v.w === null || v.fwdRid !== null) return;
    if (v.w >= g.lastMid) return;
    v.fwdRid = this.request({ t: 'pull', gid: g.gid, after: v.w, limit: PAGE_LIMIT }, { kind: 'after', gid: g.gid, view: v });
    this.markView(g.gid);
  }

  sendEnter(g) {
    const v = g.view;
    if (!v || this.state !== 'online' || v.fwdRid !== null) return;
    v.fwdRid = this.request({ t: 'enter', gid: g.gid, limit: PAGE_LIMIT }, { kind: 'enter', gid: g.gid, view: v });
  }

  transmitSend(p) {
    p.tries++;
    this.request({ t: 'send', gid: p.gid, cid: p.cid, body: p.body }, { kind: 'send', gid: p.gid, cid: p.cid });
  }

  // ---- other tabs --------------------------------------------------------------------

  broadcast(msg) {
    if (this.channel && this.uid) {
      try {
        this.channel.postMessage({ ...msg, uid: this.uid });
      } catch {
        /* closed */
      }
    }
  }

  onChannel(msg) {
    if (!msg || msg.uid !== this.uid) return;
    if (msg.kind === 'ack' && msg.acks) {
      for (const [gid, mid] of Object.entries(msg.acks)) {
        const g = this.groups.get(gid);
        if (g) g.ack = Math.max(g.ack, asInt(mid));
      }
      this.markGroups();
    } else if (msg.kind === 'membership') {
      this.queueGroupsRefresh();
    }
  }

  queueGroupsRefresh() {
    if (this.groupsRefreshQueued) return;
    this.groupsRefreshQueued = true;
    setTimeout(() => {
      this.groupsRefreshQueued = false;
      this.refreshGroups();
    }, 100);
  }

  // ---- reporting changes -------------------------------------------------------------

  entryOf(gid, m) {
    const { text, binary } = bodyText(m.body);
    return { key: 'm' + m.mid, sort: m.mid, mid: m.mid, from: m.from, ts: m.ts, text, binary, own: m.from === this.uid, state: 'stored' };
  }

  pendingEntry(p) {
    return { key: 'p' + p.cid, sort: 1e15 + p.seq, cid: p.cid, from: this.uid, ts: 0, text: p.body, binary: false, own: true, state: p.state, code: p.code };
  }

  markGroups() {
    this.dirty.groups = true;
    this.schedule();
  }

  markView(gid, { reset = false, upserts = [], removes = [] } = {}) {
    let d = this.dirty.views.get(gid);
    if (!d) this.dirty.views.set(gid, (d = { reset: false, upserts: new Map(), removes: new Set() }));
    if (reset) {
      d.reset = true;
      d.upserts.clear();
      d.removes.clear();
    }
    for (const e of upserts) {
      d.removes.delete(e.key);
      d.upserts.set(e.key, e);
    }
    for (const k of removes) {
      d.upserts.delete(k);
      d.removes.add(k);
    }
    this.schedule();
  }

  schedule() {
    if (this.dirty.scheduled) return;
    this.dirty.scheduled = true;
    queueMicrotask(() => this.flushEvents());
  }

  flushEvents() {
    const { groups, views } = this.dirty;
    this.dirty = { groups: false, views: new Map(), scheduled: false };
    for (const [gid, d] of views) {
      this.dispatchEvent(
        new CustomEvent('view', {
          detail: { gid, reset: d.reset, upserts: [...d.upserts.values()], removes: [...d.removes], meta: this.viewMeta(gid) },
        }),
      );
    }
    if (groups) this.dispatchEvent(new CustomEvent('groups', { detail: {} }));
  }
}
