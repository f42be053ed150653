// A group's view in the page, a part of GwClient (client.js installs these methods on
// its prototype; `this` is the client): opening and closing it, paging (enter, pull
// after, pull before), live messages and `notify`, the watermark, and the batched acks.
// Also the Group and View classes that hold what the page knows of each group.

import { GroupLog } from './group-log.js';
import { reactionsOf, reactionList } from './reactions.js';
import { bodyText, asInt, now } from './util.js';

const PAGE_LIMIT = 100; // messages per enter/pull (the server's default page)
const MAX_ACK_ENTRIES = 32; // per ack frame (protocol limit)
// A group view that is left keeps its newest messages in memory, so that coming back
// to it pulls only what arrived since (pull after the watermark) instead of everything.
const KEEP_WHEN_LEFT = 500;

/** What this page knows of one group. */
export class Group {
  constructor(gid) {
    this.gid = gid;
    this.lastMid = 0; // highest mid known to exist
    // The horizon (Retention): messages below it were deleted by the group's retention;
    // 1 while none were (and from a gateway before retention, which does not say).
    this.firstMid = 1;
    this.ack = 0; // highest ack known for this user: the server's, ours, or another tab's
    // The person's cursor (reads.js): the highest read known (the server's, ours once
    // sent, or another tab's), null while the user never sent one; and the highest this
    // page was told is on screen (markRead), sent in batches like the acks.
    this.read = null;
    this.readWant = 0;
    this.view = null; // a View once the group has been opened in this page
    // Later versions of its messages (versions.js): mid -> {mid, ver, recalled, body},
    // the newest kept, applied to a message held now or when it comes.
    this.versions = new Map();
    // The change cursor (cursor.js): every change up to it is applied to what the view
    // holds (null: none yet; the first page sets it); the highest cseq heard of the
    // group; a stale page's last_cseq to pull the changes after again; the `changes`
    // request on its way, and whether to ask again after its reply.
    this.cseq = null;
    this.lastCseq = 0;
    this.recheckFrom = null;
    this.changesRid = null;
    this.changesAgain = false;
  }
}

/** A group that has been opened: its log (group-log.js), and the requests and the ack
 * timer that keep it filled and acked. */
export class View extends GroupLog {
  constructor() {
    super();
    this.fwdRid = null; // the enter or pull-after in flight (one at a time)
    this.olderRid = null; // the pull-before in flight
    this.ackTimer = null;
    // The window held being paged again (changes_gone_before, cursor.js): {next, to, rid}.
    this.repage = null;
  }
}

export const viewMethods = {
  // ---- public: the group view ------------------------------------------------------

  /** Open a group's view. The first time: `enter` (pull after the stored ack, shared by
   * all sessions of the user); later: pull after this page's watermark. */
  open(gid) {
    if (this.openGid === gid) return;
    this.close();
    const g = this.groups.get(gid);
    if (!g) return;
    this.openGid = gid;
    if (!g.view) {
      g.view = new View();
      g.cseq = null; // nothing held: the first page sets it
    }
    const v = g.view;
    v.horizon(g.firstMid); // a view kept from an earlier visit: held from the horizon on
    v.unacked = 0;
    v.firstUnread = null;
    this.markView(gid, { reset: true });
    if (v.w === null) {
      this.sendEnter(g);
    } else {
      // Messages that came live while the view was closed are seen now: ack them.
      this.flushAcks([gid], 'open');
      this.catchUp(g);
      // And what changed in what it holds, before it is reported current.
      this.pullChanges(g, 'open');
      if (v.repage) this.repageStep(g);
    }
    this.markGroups();
  },

  /** Leave the view (another group, back to the list, page hidden): ack at once, and
   * send the reads. */
  close() {
    const gid = this.openGid;
    if (!gid) return;
    this.flushAcks([gid], 'leave');
    this.flushReads('leave');
    this.openGid = null;
    const g = this.groups.get(gid);
    if (g && g.view) g.view.trim(KEEP_WHEN_LEFT);
    this.markGroups();
  },

  /** Ack the open group and send the reads now (the page is being hidden or unloaded). */
  flushOpen(reason = 'leave') {
    if (this.openGid) this.flushAcks([this.openGid], reason);
    this.flushReads(reason);
  },

  /** Older history of the open group: `pull before` the lowest mid shown. */
  loadOlder() {
    const g = this.groups.get(this.openGid);
    const v = g && g.view;
    if (!v || v.w === null || !v.hasOlder || v.olderRid !== null || this.state !== 'online') return false;
    const before = v.lowestShown();
    if (!v.olderExists()) { // the start of the group, or its horizon
      v.hasOlder = false;
      this.markView(g.gid);
      return false;
    }
    v.olderRid = this.request({ t: 'pull', gid: g.gid, before, limit: PAGE_LIMIT }, { kind: 'before', gid: g.gid, view: v });
    this.markView(g.gid);
    return true;
  },

  /** Everything a view shows, sorted: stored messages by mid, then pending ones. */
  viewEntries(gid) {
    const g = this.groups.get(gid);
    const out = [];
    if (g && g.view) for (const m of g.view.held.values()) out.push(this.entryOf(gid, m));
    for (const p of this.pending.values()) if (p.gid === gid) out.push(this.pendingEntry(p));
    return out.sort((a, b) => a.sort - b.sort);
  },

  viewMeta(gid) {
    const g = this.groups.get(gid);
    const v = g && g.view;
    if (!v) return { hasOlder: false, olderGone: false, loadingOlder: false, catchingUp: false, firstUnread: null, lastMid: g ? g.lastMid : 0, firstMid: g ? g.firstMid : 1 };
    return {
      hasOlder: v.hasOlder,
      // Nothing older to load because retention deleted it (not the group's start).
      olderGone: !v.hasOlder && v.olderRid === null && v.w !== null && v.olderGone(),
      loadingOlder: v.olderRid !== null,
      // Its first page, newer ones, or the changes to what it holds are on their way.
      catchingUp: v.w === null || v.fwdRid !== null || g.changesRid !== null || v.repage !== null,
      firstUnread: v.firstUnread,
      lastMid: g.lastMid,
      firstMid: g.firstMid,
      w: v.w,
    };
  },

  // ---- incoming ----------------------------------------------------------------------

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
      this.hold(g, this.fromPage(m));
      this.advance(g);
    }
    this.markGroups();
  },

  /** `notify`: the gateway dropped pushes for this page (it was too slow) and says where
   * the group is now. The open group pulls after its watermark; the others only count. */
  onNotify(m) {
    const g = this.groups.get(String(m.gid));
    if (!g) return this.queueGroupsRefresh();
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    if (g.gid === this.openGid) this.catchUp(g);
    this.markGroups();
  },

  onPage(m, info) {
    const gid = String(m.gid);
    if (info && info.kind === 'refresh') return this.onRefresh(m, info);
    const g = this.groups.get(gid);
    if (!g || !g.view || !info || !info.view) return;
    const v = g.view;
    const msgs = Array.isArray(m.msgs) ? m.msgs : [];
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    // The horizon: a page says it (gone_before, when it asked below it, is the same).
    this.horizonOf(g, Math.max(asInt(m.first_mid), asInt(m.gone_before)));
    if (info.view !== v) return; // a reply to a view that has since been replaced
    // The change cursor (cursor.js): the first page sets it; a page read before changes
    // already applied holds its entries as partial, and they are checked again.
    const stale = this.pageCseq(g, m, info.kind === 'enter' && v.w === null);
    const at = (e) => {
      const x = this.fromPage(e);
      if (stale) x.partial = true;
      return x;
    };
    if (info.kind === 'repage') {
      this.onRepage(g, m, msgs, stale);
      if (stale) this.recheck(g, m);
      return;
    }
    if (info.kind === 'before') {
      v.olderRid = null;
      for (const e of msgs) this.hold(g, at(e), true);
      v.hasOlder = msgs.length > 0 && !!m.more && v.olderExists();
      if (stale) this.recheck(g, m);
      this.markView(gid);
      return;
    }
    // enter or pull after.
    v.fwdRid = null;
    if (v.w === null) {
      // The first page of `enter` starts just after the user's ack: everything below
      // its first mid was read before (in this tab or another), or deleted by retention
      // (an ack below the horizon: the page starts at it). An empty page means nothing
      // is unread: the ack is the group's last mid.
      v.w = msgs.length ? asInt(msgs[0].mid) - 1 : asInt(m.last_mid);
      // Acked: up to the page's start, or further (a view that starts after the read,
      // behind the ack: nothing to ack again up to the ack).
      v.ackedTo = Math.max(v.ackedTo, v.w, g.ack);
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
    for (const e of msgs) this.hold(g, at(e));
    if (stale) this.recheck(g, m);
    // Changes heard before the first page (pushes, a welcome) that it may not include.
    else if (g.cseq !== null && g.lastCseq > g.cseq) this.pullChanges(g, 'first');
    v.hasOlder = v.olderExists();
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
  },

  // ---- the watermark, dedup, holes, acks ---------------------------------------------

  /** The group's horizon is firstMid (from a page, `joined`, `welcome` or `groups`; it
   * only moves up): kept in the group, and given to its view, whose watermark steps
   * over the deleted mids (a pull after a watermark below the horizon gets a page
   * starting at it: waiting for the mids below would wait forever), dropping what it
   * held from before that gap (GroupLog.horizon). */
  horizonOf(g, firstMid) {
    if (!(firstMid > g.firstMid)) return;
    g.firstMid = firstMid;
    const dropped = g.view ? g.view.horizon(firstMid) : null;
    if (dropped) this.markView(g.gid, { removes: dropped.map((mid) => 'm' + mid) });
  },

  /** A message of a page or a `msg` push: its version (0: as sent), and a recalled one
   * without a body. */
  fromPage(e) {
    const m = { mid: asInt(e.mid), from: String(e.from), ts: asInt(e.ts), ver: asInt(e.ver), recalled: e.recalled === true };
    if (!m.recalled) m.body = e.body;
    // The cseq of its latest change (cursor.js) and its reactions, when it has them.
    if (asInt(e.cseq) > 0) m.cseq = asInt(e.cseq);
    if (!m.recalled && e.reactions) {
      const { reactions, mine } = reactionsOf(e);
      m.reactions = reactions;
      m.mine = mine;
    }
    return m;
  },

  /** Keep a message unless it is already held ((gid, mid) is the dedup key: GroupLog), at
   * the highest version known of it (versions.js): a message held at a lower version is
   * replaced, and a later version that came before the message is applied to it. */
  hold(g, m, older = false) {
    m = this.latestOf(g, m);
    const r = g.view.hold(m, older);
    if (r === 'duplicate' && g.view.update(m)) {
      this.markView(g.gid, { upserts: [this.entryOf(g.gid, m)] });
      return false;
    }
    if (r === 'duplicate') this.counters.duplicates++;
    if (r !== 'held') return false;
    this.markView(g.gid, { upserts: [this.entryOf(g.gid, m)] });
    return true;
  },

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
  },

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
  },

  ackIfCounted() {
    const g = this.groups.get(this.openGid);
    if (g && g.view && g.view.ackDueByCount(this.ackEvery)) this.flushAcks([g.gid], 'count');
  },

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
  },

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
  },

  /** The first page of a view: `enter` (after the stored ack), or, when the person has
   * seen less than the devices hold (a read behind the ack), a pull after the read: the
   * view starts at the first message the person has not seen, where unread counts from. */
  sendEnter(g) {
    const v = g.view;
    if (!v || this.state !== 'online' || v.fwdRid !== null) return;
    const info = { kind: 'enter', gid: g.gid, view: v };
    const read = this.readOf(g);
    if (read !== null && read < g.ack) v.fwdRid = this.request({ t: 'pull', gid: g.gid, after: read, limit: PAGE_LIMIT }, info);
    else v.fwdRid = this.request({ t: 'enter', gid: g.gid, limit: PAGE_LIMIT }, info);
  },

  // ---- reporting changes -------------------------------------------------------------

  /** A held message as the view shows it: a recalled one has no text. */
  entryOf(gid, m) {
    const recalled = !!m.recalled;
    const { text, binary } = recalled ? { text: '', binary: false } : bodyText(m.body);
    return { key: 'm' + m.mid, sort: m.mid, mid: m.mid, from: m.from, ts: m.ts, text, binary, own: m.from === this.uid, state: 'stored', ver: m.ver || 0, recalled, cseq: m.cseq || 0, reactions: reactionList(m) };
  },
};
