// The change cursor of each group, a part of GwClient (client.js installs these methods
// on its prototype; `this` is the client): how the messages a page already holds stay
// current when they change (edits, recalls, erasure tombstones, reactions) and when the
// group's horizon moves. docs/PROTOCOL.md, Changes; the client rule of issue 36.
//
// Every change to an existing message takes the group's next `cseq` (1, 2, 3, ...). A
// group keeps, with its state (Group.cseq), the cseq up to which every change has been
// applied to what its view holds: its cursor. Each held message keeps the cseq of the
// state held (its `cseq`, 0: as sent).
//   - A push with a cseq (`edited`, `recalled`, `reacted`) is applied when newer than the
//     held message's cseq. cseq = cursor + 1 moves the cursor; a higher one is a hole
//     (a push was dropped, or went to another node first): `changes` after the cursor is
//     pulled. A push applied over a hole, or over a state that may be stale, leaves the
//     message's cseq where it was (`partial`): the pull replaces it with the full state.
//   - `changed` (changes not pushed one by one: an erasure, a retention pass, pushes past
//     the outbound budget), a group opened, and a reconnect (when the welcome says the
//     group moved, and always for the open group) pull `changes` after the cursor, a page
//     at a time until `more` is false; each entry is the message's whole current state
//     and replaces what is held when newer. The view says `catchingUp` until then: it is
//     not reported current before.
//   - A page (enter, pull) read before changes this page has already applied (its
//     `last_cseq` below the cursor) may hold stale states: its entries are partial, and
//     the changes after its last_cseq are pulled again (a re-check: O(changes since)).
//   - `changes_gone_before`: the log no longer reaches the cursor (the change horizon,
//     --retain-changes); cursor = last_cseq, and the window held is paged again, each
//     held message replaced by its page entry when newer.
//   - `no_group`: the group was deleted; it goes.
// A group never opened has no cursor: nothing of it is held, its first page sets the
// cursor (its last_cseq). An older gateway (no last_cseq) leaves every cursor unset.

import { asInt } from './util.js';

export const CHANGES_LIMIT = 500; // entries per `changes` (the server's maximum)
const REPAGE_LIMIT = 100; // messages per page when the window held is paged again
const RETRY_CODES = new Set(['overloaded', 'unavailable', 'internal', 'rate_limited']);
const CHANGE_LOG_MAX = 2000;

/** The cseq of a held message or an entry (0: never changed). */
export const cseqOf = (m) => (m && m.cseq ? m.cseq : 0);

export const cursorMethods = {
  // ---- public ------------------------------------------------------------------------

  /** The change cursor of gid: every change up to it is applied to what its view holds;
   * null while the group has none (never opened here, or an older gateway). */
  changeCursor(gid) {
    const g = this.groups.get(gid);
    return g ? g.cseq : null;
  },

  // ---- internals ---------------------------------------------------------------------

  /** A cseq heard of gid (a push, `changed`, a page, a welcome): it is the group's
   * latest known. */
  heardCseq(g, cseq) {
    if (cseq > g.lastCseq) g.lastCseq = cseq;
  },

  /** The cursor rule for a push carrying cseq: 'next' (cseq = cursor + 1, the cursor
   * moved: the message's state is complete at cseq), 'hole' (a pull is on its way),
   * 'old' (at or below the cursor) or 'none' (no cursor, or no cseq). */
  stepCursor(g, cseq) {
    if (!cseq) return 'none';
    this.heardCseq(g, cseq);
    if (g.cseq === null) return 'none';
    if (cseq <= g.cseq) return 'old';
    if (cseq === g.cseq + 1 && g.recheckFrom === null) {
      g.cseq = cseq;
      return 'next';
    }
    this.pullChanges(g, 'hole');
    return 'hole';
  },

  /** Pull `changes` of g after its cursor (or after an earlier re-check point, or, to
   * continue a reply with `more`, after its upto). One at a time per group: asked again
   * while one is on its way, it is sent again after the reply. */
  pullChanges(g, why, after = null) {
    if (g.cseq === null || this.state !== 'online' || this.changesUnsupported) return;
    if (g.changesRid !== null) {
      g.changesAgain = true;
      return;
    }
    let from = after !== null ? after : g.cseq;
    if (g.recheckFrom !== null) from = Math.min(from, g.recheckFrom);
    g.recheckFrom = null;
    g.changesAgain = false;
    const rid = this.request({ t: 'changes', gid: g.gid, after: from, limit: CHANGES_LIMIT }, { kind: 'changes', gid: g.gid, group: g, after: from, why });
    if (rid === null) return;
    g.changesRid = rid;
    if (g.view) this.markView(g.gid);
  },

  /** After a welcome: the groups whose changes may have been missed while offline (the
   * welcome says their last_cseq moved past the cursor, or a pull or a re-page was cut
   * off), and the open group always, before its view is current again. */
  resumeCursors() {
    for (const g of this.groups.values()) {
      if (g.cseq === null) continue;
      if (g.view && g.view.repage) this.repageStep(g);
      if (g.lastCseq > g.cseq || g.recheckFrom !== null || g.changesAgain || g.gid === this.openGid) this.pullChanges(g, 'resume');
    }
  },

  /** The connection is gone: what was on its way is asked again after the welcome. */
  resetCursors() {
    for (const g of this.groups.values()) {
      if (g.changesRid !== null) g.changesAgain = true;
      g.changesRid = null;
      if (g.view && g.view.repage) g.view.repage.rid = null;
    }
  },

  /** A page of messages (enter, pull, older history, a re-page, a refresh) said the
   * group's last_cseq: its first page sets the cursor; a page read before changes
   * already applied is stale (returns true: its entries are partial, and the changes
   * since it are pulled again once they are held). */
  pageCseq(g, m, first) {
    if (m.last_cseq === undefined || m.last_cseq === null) return false;
    const p = asInt(m.last_cseq);
    this.heardCseq(g, p);
    if (g.cseq === null) {
      if (first) g.cseq = p;
      return false;
    }
    return p < g.cseq;
  },

  /** The stale page's entries are held: the changes after its last_cseq again. */
  recheck(g, m) {
    const p = asInt(m.last_cseq);
    g.recheckFrom = g.recheckFrom === null ? p : Math.min(g.recheckFrom, p);
    this.pullChanges(g, 'recheck');
  },

  /** `changed {gid, last_cseq}`: changes were made that were not pushed one by one. */
  onChanged(m) {
    const g = this.groups.get(String(m.gid));
    if (!g) return this.queueGroupsRefresh();
    const last = asInt(m.last_cseq);
    this.heardCseq(g, last);
    if (g.cseq !== null && last > g.cseq) this.pullChanges(g, 'changed');
  },

  /** The `changes` reply: each entry applied, the cursor moved to `upto`; on with the
   * next page while `more`, and again when something asked for it meanwhile. */
  onChanges(m, info) {
    if (!info || info.kind !== 'changes') return;
    const g = this.groups.get(info.gid);
    if (!g || g !== info.group) return; // left, or replaced, meanwhile
    g.changesRid = null;
    if (g.cseq === null) return; // its view was replaced meanwhile (a new store): its first page sets the cursor
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    const last = asInt(m.last_cseq);
    this.heardCseq(g, last);
    this.horizonOf(g, asInt(m.first_mid));
    if (g.view) {
      const dropped = g.view.dropBelow(g.firstMid);
      if (dropped.length) this.markView(g.gid, { removes: dropped.map((mid) => 'm' + mid) });
    }
    const gone = asInt(m.changes_gone_before);
    const msgs = Array.isArray(m.msgs) ? m.msgs : [];
    const upto = asInt(m.upto);
    let applied = 0;
    if (gone) {
      // The log cannot serve the cursor: what is held is paged again instead.
      g.cseq = Math.max(g.cseq ?? 0, last);
      g.recheckFrom = null;
      this.startRepage(g);
    } else {
      for (const e of msgs) applied += this.applyChange(g, e);
      g.cseq = Math.max(g.cseq ?? 0, upto);
    }
    if (this.changeLog.length > CHANGE_LOG_MAX) this.changeLog.splice(0, CHANGE_LOG_MAX / 2);
    const rec = { gid: g.gid, why: info.why, after: info.after, upto, last_cseq: last, entries: msgs.length, applied, more: !!m.more, gone };
    this.changeLog.push(rec);
    this.dispatchEvent(new CustomEvent('changes', { detail: { gid: g.gid, after: info.after, upto: gone ? g.cseq : upto, entries: msgs.length, applied, gone: gone > 0 } }));
    if (!gone && m.more && upto > info.after) this.pullChanges(g, 'more', upto);
    else if (g.changesAgain || g.recheckFrom !== null || (g.lastCseq > g.cseq && upto > info.after)) this.pullChanges(g, 'again');
    if (g.view) this.markView(g.gid);
    this.markGroups();
  },

  /** One entry of `changes`: the message's whole current state. It replaces the held
   * message when newer; a message not held is remembered as a later version, for a page
   * on its way that was read before it. 1 when the view changed. */
  applyChange(g, e) {
    const m = this.fromPage(e);
    if (m.mid < g.firstMid) return 0;
    const v = g.view;
    if (v && v.held.has(m.mid)) {
      if (!v.update(m)) return 0;
      this.markView(g.gid, { upserts: [this.entryOf(g.gid, m)] });
      return 1;
    }
    if (m.ver > this.knownVer(g, m.mid)) this.keepVersion(g, { mid: m.mid, ver: m.ver, recalled: m.recalled, body: m.body });
    return 0;
  },

  /** An err answering `changes`: the group deleted goes, a busy gateway is asked again
   * later, an older gateway (bad_type) is not asked again on this connection. */
  onChangesErr(info, code, msg, retryMs) {
    const g = this.groups.get(info.gid);
    if (!g || g !== info.group) return true;
    g.changesRid = null;
    if (g.view) this.markView(g.gid);
    if (code === 'no_group') {
      this.dropGroup(g.gid);
      this.broadcast({ kind: 'membership' });
      return true;
    }
    if (code === 'not_member') {
      this.queueGroupsRefresh();
      return true;
    }
    if (code === 'bad_type') {
      this.changesUnsupported = true;
      return true;
    }
    if (RETRY_CODES.has(code)) {
      g.changesAgain = true;
      setTimeout(() => {
        if (this.groups.get(g.gid) === g && g.changesRid === null) this.pullChanges(g, 'retry', info.after);
      }, Math.max(asInt(retryMs), 500));
      return true;
    }
    return false; // told as a notice
  },

  // ---- paging the window held again (changes_gone_before) ----------------------------

  startRepage(g) {
    const v = g.view;
    if (!v || !v.held.size) return;
    let lo = Infinity;
    let hi = 0;
    for (const mid of v.held.keys()) {
      lo = Math.min(lo, mid);
      hi = Math.max(hi, mid);
    }
    v.repage = { next: Math.max(lo, g.firstMid) - 1, to: hi, rid: null };
    this.repageStep(g);
  },

  repageStep(g) {
    const v = g.view;
    const r = v && v.repage;
    if (!r || r.rid !== null || this.state !== 'online') return;
    r.rid = this.request({ t: 'pull', gid: g.gid, after: r.next, limit: REPAGE_LIMIT }, { kind: 'repage', gid: g.gid, view: v });
    this.markView(g.gid);
  },

  /** A page of the window paged again: each held message replaced when the entry is
   * newer (the page's new messages are left to the forward pulls). */
  onRepage(g, m, msgs, stale) {
    const v = g.view;
    const r = v.repage;
    if (!r) return;
    r.rid = null;
    for (const e of msgs) {
      const x = this.fromPage(e);
      x.partial = stale;
      if (v.held.has(x.mid) && v.update(x)) this.markView(g.gid, { upserts: [this.entryOf(g.gid, x)] });
    }
    const last = msgs.length ? asInt(msgs[msgs.length - 1].mid) : r.next;
    if (!m.more || !msgs.length || last >= r.to) v.repage = null;
    else {
      r.next = last;
      this.repageStep(g);
    }
    this.markView(g.gid);
  },

  onRepageErr(info, code) {
    const g = this.groups.get(info.gid);
    const v = g && g.view;
    if (!v || v !== info.view || !v.repage) return;
    v.repage.rid = null;
    if (code === 'no_group') {
      this.dropGroup(g.gid);
      return;
    }
    if (RETRY_CODES.has(code)) setTimeout(() => this.repageStep(g), 1000);
    else v.repage = null;
    this.markView(g.gid);
  },
};
