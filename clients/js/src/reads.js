// What the person has seen, a part of GwClient (client.js installs these methods on its
// prototype; `this` is the client): the `read` cursor of each group (docs/PROTOCOL.md,
// Receipts), beside the ack. The ack says the device holds the messages; the read says
// the person saw them, and it is what the gateway counts unread from once the user sent
// one, and what other members see as "seen". The page says what is on screen
// (markRead); the cursor goes out batched like the acks (ack_every, ack_delay_ms), and at
// once when the view is left or the page is hidden.

import { asInt } from './util.js';

const MAX_READ_ENTRIES = 32; // per read frame (protocol limit)

export const readMethods = {
  // ---- public: reads ---------------------------------------------------------------

  /** The person has seen every message of gid up to mid. Cumulative: a mid at or below
   * the group's read changes nothing. Sent after ack_every messages' worth of moves, or
   * ack_delay_ms after the first unsent one, or when the view is left. */
  markRead(gid, mid) {
    const g = this.groups.get(gid);
    mid = asInt(mid);
    if (!g || mid < 1) return;
    const from = Math.max(g.read ?? 0, g.readWant);
    if (mid <= from) return;
    g.readWant = mid;
    this.readsUnsent += mid - from;
    this.markGroups(); // its unread count moves now, not when the read is sent
    if (this.readsUnsent >= this.ackEvery) this.flushReads('count');
    else if (!this.readTimer) this.readTimer = setTimeout(() => this.flushReads('delay'), this.ackDelayMs);
  },

  // ---- reads internals ---------------------------------------------------------------

  /** Send the reads not sent yet, every group's in one frame (up to 32 a frame). Offline
   * they wait for the next welcome, which sends them again if the gateway has less. */
  flushReads(reason) {
    clearTimeout(this.readTimer);
    this.readTimer = null;
    if (this.state !== 'online' || this.peersUnsupported) return;
    const due = [...this.groups.values()].filter((g) => g.readWant > (g.read ?? 0));
    for (let i = 0; i < due.length; i += MAX_READ_ENTRIES) {
      const reads = {};
      for (const g of due.slice(i, i + MAX_READ_ENTRIES)) reads[g.gid] = g.readWant;
      if (!this.sendFrame({ t: 'read', reads })) return;
      for (const g of due.slice(i, i + MAX_READ_ENTRIES)) g.read = g.readWant;
      if (this.readLog.length > 2000) this.readLog.splice(0, 1000);
      this.readLog.push({ reason, reads });
      this.broadcast({ kind: 'read', reads });
    }
    this.readsUnsent = 0;
  },

  /** A read another tab of this user sent. */
  readElsewhere(gid, mid) {
    const g = this.groups.get(gid);
    if (!g) return;
    g.read = Math.max(g.read ?? 0, asInt(mid));
    this.markGroups();
  },
};
