// The user's other tabs, a part of GwClient (client.js installs these methods on its
// prototype; `this` is the client): a BroadcastChannel that shares acks, reads and
// membership changes between the tabs of this browser signed in as the same user.

import { asInt } from './util.js';

/** The channel, its messages given to client.onChannel; null where there is none. */
export function openTabChannel(client) {
  if (typeof BroadcastChannel === 'undefined') return null;
  const channel = new BroadcastChannel('gw-demo');
  channel.onmessage = (ev) => client.onChannel(ev.data);
  return channel;
}

export const tabSyncMethods = {
  // ---- other tabs --------------------------------------------------------------------

  broadcast(msg) {
    if (this.channel && this.uid) {
      try {
        this.channel.postMessage({ ...msg, uid: this.uid });
      } catch {
        /* closed */
      }
    }
  },

  onChannel(msg) {
    if (!msg || msg.uid !== this.uid) return;
    if (msg.kind === 'ack' && msg.acks) {
      for (const [gid, mid] of Object.entries(msg.acks)) {
        const g = this.groups.get(gid);
        if (g) g.ack = Math.max(g.ack, asInt(mid));
      }
      this.markGroups();
    } else if (msg.kind === 'read' && msg.reads) {
      for (const [gid, mid] of Object.entries(msg.reads)) this.readElsewhere(gid, mid);
    } else if (msg.kind === 'membership') {
      this.queueGroupsRefresh();
    }
  },

  queueGroupsRefresh() {
    if (this.groupsRefreshQueued) return;
    this.groupsRefreshQueued = true;
    setTimeout(() => {
      this.groupsRefreshQueued = false;
      this.refreshGroups();
    }, 100);
  },
};
