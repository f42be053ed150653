// Reporting changes, a part of GwClient (client.js installs these methods on its
// prototype; `this` is the client): what changed is marked in `dirty` and reported once
// per task, as one 'view' event per changed group and at most one 'groups' event.

/** `dirty` with nothing marked. */
export const nothingDirty = () => ({ groups: false, views: new Map(), scheduled: false });

export const batchingMethods = {
  markGroups() {
    this.dirty.groups = true;
    this.schedule();
  },

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
  },

  schedule() {
    if (this.dirty.scheduled) return;
    this.dirty.scheduled = true;
    queueMicrotask(() => this.flushEvents());
  },

  flushEvents() {
    const { groups, views } = this.dirty;
    this.dirty = nothingDirty();
    for (const [gid, d] of views) {
      this.dispatchEvent(
        new CustomEvent('view', {
          detail: { gid, reset: d.reset, upserts: [...d.upserts.values()], removes: [...d.removes], meta: this.viewMeta(gid) },
        }),
      );
    }
    if (groups) this.dispatchEvent(new CustomEvent('groups', { detail: {} }));
  },
};
