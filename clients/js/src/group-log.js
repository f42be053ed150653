// The per-group log of a client (docs/PROTOCOL.md, Semantics): what it holds of one
// group, its watermark, and when to ack. Pure logic: no socket, no timers, no clock of
// its own (the caller passes the time), so every rule here is tested on its own
// (test/group-log.test.js) and reused by any client built on this package.
//
//   held     mid -> message: the dedup, by (gid, mid), whatever the gateway sends twice;
//            each at the newest state seen of it (its `cseq`, the cseq of its latest
//            change, then its `ver`: 0, or absent, as sent)
//   w        the contiguous watermark: every message with mid <= w is held (or was acked
//            before the log was opened). null until the first page says where it stands
//   ackedTo  the highest ack sent for the group. Only w is ever acked, never a mid beyond
//            a hole: an ack is cumulative ("I hold everything up to here").
//   firstMid the group's horizon (Retention): messages below it were deleted, so they
//            never come. The watermark steps over them, and older history stops there.

/** Whether state a of a message is newer than state b: by the cseq of its latest change
 * (cursor.js; 0: never changed), and at the same cseq by its version (an older gateway
 * has no cseq: versions alone). */
export function newerState(a, b) {
  const ca = a.cseq || 0;
  const cb = b.cseq || 0;
  if (ca !== cb) return ca > cb;
  return (a.ver || 0) > (b.ver || 0);
}

export class GroupLog {
  constructor() {
    /** @type {Map<number, object>} */
    this.held = new Map();
    this.w = null;
    this.lowest = null; // lowest mid held; older history is pulled `before` it
    this.hasOlder = false;
    this.ackedTo = 0;
    this.unacked = 0; // messages newly held since the last ack
    this.firstUnackedAt = 0; // when the first of them came (the caller's clock)
    this.firstUnread = null; // mid of the first unread message when the log was entered
    this.firstMid = 1; // the group's horizon as last heard: lower mids were deleted
  }

  /** The group's horizon moved to firstMid (a `page`, `joined`, `welcome` or `groups`
   * said so; it only ever moves up). The mids below it never come: a watermark below it
   * steps up to just under it, and there is no older history to pull past it. Messages
   * held from before such a gap are dropped (what was deleted in between would be a
   * silent hole in what is shown): the log holds the group from the horizon on. Returns
   * the mids dropped ([] most often), or null when the horizon did not move. */
  horizon(firstMid) {
    if (!(firstMid > this.firstMid)) return null;
    this.firstMid = firstMid;
    const dropped = [];
    if (this.w !== null && this.w < firstMid - 1) {
      this.w = firstMid - 1;
      for (const mid of this.held.keys()) if (mid < firstMid) dropped.push(mid);
      for (const mid of dropped) this.held.delete(mid);
      if (dropped.length) {
        this.lowest = null;
        for (const mid of this.held.keys()) if (this.lowest === null || mid < this.lowest) this.lowest = mid;
      }
      if (this.firstUnread !== null && this.firstUnread < firstMid) this.firstUnread = firstMid;
    }
    if (this.hasOlder && !this.olderExists()) this.hasOlder = false;
    return dropped;
  }

  /** Drops the messages held below mid (the group's horizon, as a `changes` reply says
   * it: what is held converges to what the group keeps). Returns the mids dropped. */
  dropBelow(mid) {
    const dropped = [];
    for (const m of this.held.keys()) if (m < mid) dropped.push(m);
    for (const m of dropped) this.held.delete(m);
    if (dropped.length) {
      this.lowest = null;
      for (const m of this.held.keys()) if (this.lowest === null || m < this.lowest) this.lowest = m;
      if (this.w !== null && this.w < mid - 1) this.w = mid - 1;
    }
    return dropped;
  }

  /** The lowest mid held is at or below the horizon, which is above 1: the messages
   * before it were deleted by the group's retention (not merely none older exist). */
  olderGone() {
    const low = this.lowestShown();
    return this.firstMid > 1 && low > 1 && low <= this.firstMid;
  }

  /** Older history may be pulled: the lowest mid held is above the horizon. */
  olderExists() {
    return this.lowestShown() > Math.max(1, this.firstMid);
  }

  /** The lowest mid held, or just above the watermark when nothing is: `pull before` that
   * gives the history before it. */
  lowestShown() {
    if (this.lowest !== null) return this.lowest;
    return this.w === null ? 1 : this.w + 1;
  }

  /** Keeps m ({mid, from, ts, body}) unless it is held already: 'held', 'duplicate', or
   * 'ignored' for a push below the oldest message held (older history comes in order by
   * `pull before`, and a lone old message would leave a gap). older: m comes from such a
   * pull. */
  hold(m, older = false) {
    if (!m.mid) return 'ignored';
    if (this.held.has(m.mid)) return 'duplicate';
    if (!older && this.w !== null && m.mid <= this.w && m.mid < this.lowestShown()) return 'ignored';
    this.held.set(m.mid, m);
    if (this.lowest === null || m.mid < this.lowest) this.lowest = m.mid;
    return 'held';
  }

  /** Replaces a held message with a later state of it (m: {mid, from, ts, ver, body,
   * recalled, cseq?, reactions?, mine?}): true when it was held at an older one
   * (newerState: a lower cseq, or the same and a lower version). States may overtake
   * each other, so an older one changes nothing; a message not held is not added. */
  update(m) {
    const held = this.held.get(m.mid);
    if (!held || !newerState(m, held)) return false;
    this.held.set(m.mid, m);
    return true;
  }

  /** Moves the watermark over every contiguous message now held; how many it moved. */
  advance() {
    if (this.w === null) return 0;
    let n = 0;
    while (this.held.has(this.w + 1)) {
      this.w++;
      n++;
    }
    return n;
  }

  /** Counts n newly seen messages towards the next ack. True when they are the first
   * unacked ones: the caller starts its ack_delay_ms timer then (unless every is reached). */
  countUnacked(n, nowMs) {
    const first = this.unacked === 0 && n > 0;
    this.unacked += n;
    if (first) this.firstUnackedAt = nowMs;
    return first;
  }

  /** The protocol's batching: ack after `every` unacked messages (or after the delay). */
  ackDueByCount(every) {
    return this.unacked >= every;
  }

  /** The mid to ack now (the watermark), or 0 when it says nothing new. */
  ackTarget() {
    return this.w !== null && this.w >= 1 && this.w > this.ackedTo ? this.w : 0;
  }

  /** The ack up to `to` went out (or nothing was due: to omitted). */
  acked(to = this.ackedTo) {
    this.ackedTo = Math.max(this.ackedTo, to);
    this.unacked = 0;
    this.firstUnackedAt = 0;
  }

  /** Keeps only the newest `keep` messages (a log that is left: coming back pulls only
   * what arrived since). */
  trim(keep) {
    if (this.held.size <= keep) return;
    const mids = [...this.held.keys()].sort((a, b) => a - b);
    for (const mid of mids.slice(0, mids.length - keep)) this.held.delete(mid);
    this.lowest = mids[mids.length - keep];
    this.hasOlder = this.olderExists();
  }
}
