// The group list, a part of GwClient (client.js installs these methods on its prototype;
// `this` is the client): the groups of the user with their counts, as `welcome` and
// `groups` give them, and joining and leaving.

import { isValidId, asInt } from './util.js';
import { Group, View } from './views.js';

export const groupMethods = {
  // ---- public: groups ----------------------------------------------------------------

  /** Groups sorted by name, each with its unread count. */
  groupList() {
    return [...this.groups.values()]
      .sort((a, b) => (a.gid < b.gid ? -1 : a.gid > b.gid ? 1 : 0))
      .map((g) => ({ gid: g.gid, lastMid: g.lastMid, firstMid: g.firstMid, unread: this.unread(g), read: this.readOf(g), open: g.gid === this.openGid }));
  },

  /** Unread = messages after what the user has seen. Once the user sends reads (this
   * page, another tab or device: reads.js) that is the read cursor, as the gateway
   * counts. Before, for the open group it is its watermark; for the others the ack
   * (messages that arrived live while the group was not open are held, but the user has
   * not seen them). Never counted: messages below the horizon (deleted by retention). */
  unread(g) {
    const read = this.readOf(g);
    const gone = g.firstMid - 1;
    if (read !== null) return Math.max(0, g.lastMid - Math.max(read, gone));
    let seen = Math.max(g.ack, gone);
    if (g.gid === this.openGid && g.view && g.view.w !== null) seen = Math.max(seen, g.view.w);
    return Math.max(0, g.lastMid - seen);
  },

  /** The group's read cursor as this page knows it (marked here, sent or not), or null
   * while the user never sent one. */
  readOf(g) {
    if (g.read === null && g.readWant === 0) return null;
    return Math.max(g.read ?? 0, g.readWant);
  },

  /** Join a group, creating it when it does not exist (open groups). */
  join(gid) {
    if (!isValidId(gid)) throw new Error('a group name is 1-64 characters of A-Z a-z 0-9 _ . : -');
    this.request({ t: 'join', gid }, { kind: 'join', gid });
  },

  leave(gid) {
    this.request({ t: 'leave', gid }, { kind: 'leave', gid });
  },

  refreshGroups() {
    if (this.state === 'online') this.request({ t: 'groups' }, { kind: 'groups' });
  },

  // ---- incoming ----------------------------------------------------------------------

  /** The list from `welcome` (the truth at login) or from `groups` (a refresh, or the
   * push of the whole list). A partial list (`partial: true`: a database of the gateway's
   * is away) says nothing of the groups it leaves out: they are kept, not dropped, until a
   * whole list comes (the gateway pushes one once it has read them). */
  applyGroupList(list, isWelcome, partial = false) {
    const seen = new Set();
    for (const e of list) {
      const gid = String(e.gid);
      seen.add(gid);
      let g = this.groups.get(gid);
      if (!g) this.groups.set(gid, (g = new Group(gid)));
      const lastMid = asInt(e.last_mid);
      const ack = asInt(e.ack);
      const read = e.read !== undefined && e.read !== null ? asInt(e.read) : null;
      const firstMid = Math.max(1, asInt(e.first_mid)); // absent (an older gateway): 1
      if (g.view && g.view.w !== null && lastMid < g.view.w) {
        // The gateway knows fewer messages than this page holds: its store was replaced
        // (a new data folder). What this page holds is not that group any more.
        g.view = g.gid === this.openGid ? new View() : null;
        g.lastMid = lastMid;
        g.firstMid = firstMid;
        g.ack = ack;
        g.read = read;
        g.readWant = 0;
        g.versions.clear(); // later versions of that store's messages
        g.cseq = null; // and its changes: the first page sets the cursor again
        g.lastCseq = asInt(e.last_cseq);
        g.recheckFrom = null;
        if (g.view) {
          g.view.horizon(firstMid);
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
        g.read = read; // reads this page marked beyond it are sent again (flushReads)
      } else {
        g.ack = Math.max(g.ack, ack);
        if (read !== null) g.read = Math.max(g.read ?? 0, read);
      }
      this.horizonOf(g, firstMid);
      if (e.last_cseq !== undefined && e.last_cseq !== null) {
        const lastCseq = asInt(e.last_cseq);
        this.heardCseq(g, lastCseq);
        // Fewer changes than the cursor has applied: the store was restored from an older
        // copy. What is held is paged again, as when the log cannot serve the cursor.
        if (isWelcome && g.cseq !== null && lastCseq < g.cseq) {
          g.cseq = lastCseq;
          g.lastCseq = lastCseq;
          this.startRepage(g);
        }
      }
    }
    if (!partial) for (const gid of [...this.groups.keys()]) if (!seen.has(gid)) this.dropGroup(gid);
    this.groupsPartial = partial;
    this.markGroups();
  },

  onJoined(m) {
    const gid = String(m.gid);
    let g = this.groups.get(gid);
    if (!g) this.groups.set(gid, (g = new Group(gid)));
    g.lastMid = Math.max(g.lastMid, asInt(m.last_mid));
    g.ack = Math.max(g.ack, asInt(m.ack));
    this.horizonOf(g, asInt(m.first_mid));
    this.heardCseq(g, asInt(m.last_cseq));
    this.markGroups();
    this.broadcast({ kind: 'membership' });
    this.dispatchEvent(new CustomEvent('joined', { detail: { gid } }));
  },

  onLeft(gid) {
    this.dropGroup(gid);
    this.broadcast({ kind: 'membership' });
  },

  dropGroup(gid) {
    const g = this.groups.get(gid);
    if (!g) return;
    if (g.view) clearTimeout(g.view.ackTimer);
    if (this.openGid === gid) this.openGid = null;
    this.groups.delete(gid);
    this.forgetPeers(gid);
    this.dropChanges(gid);
    for (const [cid, p] of this.pending) if (p.gid === gid) this.pending.delete(cid);
    this.checkStore();
    this.markGroups();
    this.markView(gid, { reset: true });
  },
};
