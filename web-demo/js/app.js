// The demo page: sign-in, group list, message view, composer, connection state and the
// figures panel; and what members see of each other: "seen by" under the user's own
// messages, who is online in the open group, who is typing; and "edit" and "delete" under
// the user's own messages (an edited one says so, a deleted one shows as deleted, for
// everyone); reactions under every message (a few emoji to click, their counts, the
// user's own pressed). Messages edited, deleted, erased or reacted to while the page was
// offline, or the group closed, are brought up to date by the client (its change cursor)
// when it comes back or the group is opened again. Everything the protocol asks
// of a client is in the gw-client package (clients/js); this file draws what it reports
// and passes on what the user does (and sees: the messages on screen are marked read).
// User text only ever goes into the page through textContent, never as HTML.

import { GwClient, isValidId } from 'gw-client';
import { StatsPanel } from './stats.js';

const $ = (id) => document.getElementById(id);
const SESSION_KEY = 'gw-demo-session'; // per tab: a reload stays signed in, a new tab asks
const LAST_USER_KEY = 'gw-demo-last-user';
const NEAR_BOTTOM_PX = 80;
const NEAR_TOP_PX = 120;
const PRESENCE_NAMES = 8; // online members named in the group header; more are counted
// The reactions offered under every message (others' keys show beside them when set).
const REACTIONS = ['👍', '❤️', '😂', '🎉', '😮'];

const timeFmt = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });

function wsUrl() {
  // wss:// on an https:// page (the normal case), ws:// only when the gateway runs with
  // --insecure and serves the page over plain http://.
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${location.host}/ws`;
}

async function demoLogin(user) {
  let r;
  try {
    r = await fetch('demo/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user }) });
  } catch {
    throw new Error('the gateway cannot be reached');
  }
  if (r.status === 404) throw new Error('this gateway is not in demo mode: it gives no tokens for a name');
  let j = {};
  try {
    j = await r.json();
  } catch {
    /* not JSON */
  }
  if (!r.ok || typeof j.token !== 'string') throw new Error(j.error || `sign-in failed (HTTP ${r.status})`);
  return j.token;
}

function loadSession() {
  try {
    const s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
    return s && isValidId(s.user) && typeof s.token === 'string' ? s : null;
  } catch {
    return null;
  }
}

function saveSession(s) {
  try {
    if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
    else sessionStorage.removeItem(SESSION_KEY);
    if (s) localStorage.setItem(LAST_USER_KEY, s.user);
  } catch {
    /* storage unavailable: the page still works, it just forgets on reload */
  }
}

/** A small text button of a message's meta or actions line. */
function linkButton(text, act, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'link-btn act';
  b.dataset.act = act;
  b.textContent = text;
  b.addEventListener('click', onClick);
  return b;
}

function toast(text) {
  const t = document.createElement('div');
  t.className = 'toast';
  t.textContent = text;
  $('toasts').append(t);
  setTimeout(() => t.remove(), 5000);
}

/** The line under one of the user's messages: who has seen it and not the user's next
 * message (`later`, the receipts of the next of the user's messages after it, if known).
 * As chat apps do, each reader stands once, under the last of the user's messages it
 * has reached (its read cursor): reads are cumulative, so whoever read a later message
 * read this one too, and is said there. Names in a small group (the receipts list
 * them), a count in a large one. `me` is left out: the sender reads its own messages
 * too. myCursor: the user's own read (or ack) as the gateway has it, to take the user
 * out of a large group's count. */
function seenText(r, later, me, myCursor) {
  if (!r) return '';
  if (r.readers && (!later || later.readers)) {
    const further = new Set(later ? later.readers : []);
    const others = r.readers.filter((u) => u !== me && !further.has(u));
    if (!others.length) return '';
    if (others.length <= 3) return `Seen by ${others.join(', ')}`;
    return `Seen by ${others.slice(0, 2).join(', ')} and ${others.length - 2} others`;
  }
  const count = (x) => x.read - (myCursor >= x.mid ? 1 : 0);
  const n = count(r) - (later ? count(later) : 0);
  return n > 0 ? `Seen by ${n}` : '';
}

/** "bob is typing…", for the line above the composer. */
function typingText(uids) {
  if (!uids.length) return '';
  if (uids.length === 1) return `${uids[0]} is typing…`;
  if (uids.length <= 3) return `${uids.slice(0, -1).join(', ')} and ${uids.at(-1)} are typing…`;
  return `${uids.length} people are typing…`;
}

/** The message list of the open group: one <li> per entry, kept sorted by `sort`
 * (the mid; pending messages after all stored ones, in the order they were written).
 * Each <li> is watched for being on screen (onScreen): what the person has seen is
 * marked read, and the receipts of the user's own messages there are kept current.
 * Under the user's own stored messages: "edit" (the body turns into a small editor
 * until it is saved or cancelled) and "delete" (asked once more, inline). */
class MessageList {
  constructor(list, scroller, { seenOf, onScreenChanged, actions }) {
    this.list = list;
    this.scroller = scroller;
    this.nodes = new Map(); // key -> {el, sort, e}: e the entry last drawn
    this.unsent = new Map(); // key -> state of the shown entries without a mid (the user's, not stored yet)
    this.order = []; // sort values, in DOM order
    this.seenOf = seenOf; // mid -> the "seen by" line of an own message ('' for none)
    // What the user does to a message: retry(cid), discard(cid), and edit(mid, text) and
    // recall(mid), whose promises settle with the gateway's answer.
    this.actions = actions;
    // The one message being changed: {key, mode: 'edit' | 'delete', draft, busy}. It
    // outlives redraws of that message (an upsert while the editor is open keeps it).
    this.changing = null;
    this.onScreen = new Set(); // the <li>s at least half on screen (or filling half of it)
    this.visibility = new IntersectionObserver(
      (entries) => {
        for (const en of entries) {
          const seen = en.isIntersecting && (en.intersectionRatio >= 0.5 || (en.rootBounds && en.intersectionRect.height >= en.rootBounds.height / 2));
          if (seen) this.onScreen.add(en.target);
          else this.onScreen.delete(en.target);
        }
        onScreenChanged();
      },
      { root: scroller, threshold: [0, 0.5, 1] },
    );
  }

  clear() {
    this.changing = null;
    this.visibility.disconnect();
    this.onScreen.clear();
    this.list.replaceChildren();
    this.nodes.clear();
    this.unsent.clear();
    this.order = [];
  }

  indexFor(sort) {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.order[mid] < sort) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  remove(key) {
    const n = this.nodes.get(key);
    if (!n) return;
    const i = this.indexFor(n.sort);
    if (this.order[i] === n.sort) this.order.splice(i, 1);
    this.visibility.unobserve(n.el);
    this.onScreen.delete(n.el);
    n.el.remove();
    this.nodes.delete(key);
    this.unsent.delete(key);
  }

  upsert(e) {
    if (e.mid) this.unsent.delete(e.key);
    else this.unsent.set(e.key, e.state);
    const old = this.nodes.get(e.key);
    if (old) {
      old.e = e;
      this.fill(old.el, e);
      return;
    }
    const el = document.createElement('li');
    this.fill(el, e);
    const i = this.indexFor(e.sort);
    this.list.insertBefore(el, this.list.children[i] || null);
    this.order.splice(i, 0, e.sort);
    this.nodes.set(e.key, { el, sort: e.sort, e });
    this.visibility.observe(el);
  }

  /** Draw a message again as it is now (its editor opened or closed). */
  redraw(key) {
    const n = this.nodes.get(key);
    if (n) this.fill(n.el, n.e);
  }

  fill(li, e) {
    const actions = this.actions;
    li.className = 'msg' + (e.own ? ' own' : '');
    li.dataset.key = e.key;
    li.dataset.state = e.state;
    li.dataset.from = e.from || '';
    li.dataset.ver = String(e.ver || 0);
    if (e.mid) li.dataset.mid = String(e.mid);
    else delete li.dataset.mid;
    if (e.recalled) li.dataset.recalled = 'true';
    else delete li.dataset.recalled;
    const meta = document.createElement('div');
    meta.className = 'meta';
    const from = document.createElement('span');
    from.className = 'from';
    from.textContent = e.own ? `${e.from} (you)` : e.from;
    meta.append(from);
    if (e.ts) {
      const time = document.createElement('time');
      time.className = 'time';
      time.dateTime = new Date(e.ts).toISOString();
      time.textContent = timeFmt.format(new Date(e.ts));
      meta.append(time);
    }
    if (e.ver > 0 && !e.recalled) {
      const edited = document.createElement('span');
      edited.className = 'edited';
      edited.textContent = '(edited)';
      edited.title = `edited ${e.ver === 1 ? 'once' : e.ver + ' times'}`;
      meta.append(edited);
    }
    const status = document.createElement('span');
    status.className = 'mid';
    if (e.state === 'stored') {
      status.textContent = `#${e.mid}`;
      status.title = 'stored: message id in this group';
    } else if (e.state === 'pending') {
      status.textContent = 'sending…';
      status.title = 'waiting for the gateway to confirm it stored this message';
    } else {
      status.textContent = `not sent (${e.code})`;
    }
    meta.append(status);
    if (e.state === 'failed') {
      meta.append(
        linkButton('retry', 'retry', () => actions.retry(e.cid)),
        linkButton('discard', 'discard', () => actions.discard(e.cid)),
      );
    }
    const body = document.createElement('div');
    body.className = 'body';
    if (e.recalled) {
      body.textContent = 'message deleted';
      body.classList.add('deleted');
    } else {
      body.textContent = e.text; // text, never HTML
      if (e.binary) body.classList.add('muted');
    }
    const c = this.changing && this.changing.key === e.key ? this.changing : null;
    const changeable = e.own && e.state === 'stored' && !e.recalled;
    if (c && !changeable) this.changing = null; // deleted meanwhile (another tab)
    const reactions = e.state === 'stored' && !e.recalled ? [this.reactionLine(e)] : [];
    if (changeable && c && c.mode === 'edit') li.replaceChildren(meta, this.editor(e, c));
    else if (changeable) li.replaceChildren(meta, body, ...reactions, this.changeLine(e, c));
    else li.replaceChildren(meta, body, ...reactions);
    if (e.own && e.state === 'stored') this.showSeen(li, this.seenOf(e.mid));
  }

  /** The reactions of a stored message: the fixed few, then any other key set (by
   * another client), each with its count; the user's own pressed. A click sets or
   * clears the user's; the count changes when the gateway answers (and in every other
   * member's page with the push). */
  reactionLine(e) {
    const line = document.createElement('div');
    line.className = 'reactions';
    const have = new Map((e.reactions || []).map((r) => [r.key, r]));
    const keys = [...REACTIONS, ...[...have.keys()].filter((k) => !REACTIONS.includes(k))];
    for (const key of keys) {
      const r = have.get(key) || { key, count: 0, mine: false };
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'react' + (r.count > 0 ? ' has' : '');
      b.dataset.key = key;
      b.dataset.count = String(r.count);
      b.setAttribute('aria-pressed', String(r.mine));
      b.title = r.mine ? `You reacted ${key}: click to take it back` : `React ${key}`;
      const emoji = document.createElement('span');
      emoji.className = 'key';
      emoji.textContent = key; // a key is text, never HTML
      b.append(emoji);
      if (r.count > 0) {
        const n = document.createElement('span');
        n.className = 'count';
        n.textContent = String(r.count);
        b.append(n);
      }
      b.addEventListener('click', () => {
        this.actions.react(e.mid, key, !r.mine).catch((err) => toast(`Reaction: ${err.message}`));
      });
      line.append(b);
    }
    return line;
  }

  /** The line under one of the user's own messages: "edit" and "delete", or the
   * question whether to delete it. */
  changeLine(e, c) {
    const line = document.createElement('div');
    line.className = 'acts';
    if (c && c.mode === 'delete') {
      const q = document.createElement('span');
      q.className = 'ask';
      q.textContent = c.busy ? 'Deleting…' : 'Delete for everyone?';
      const yes = linkButton('delete', 'confirm-delete', () => this.recall(e));
      yes.classList.add('danger');
      const no = linkButton('cancel', 'cancel', () => this.stopChanging(e.key));
      yes.disabled = no.disabled = !!c.busy;
      line.append(q, yes, no);
      return line;
    }
    const edit = linkButton('edit', 'edit', () => this.startChanging(e, 'edit'));
    if (e.binary) edit.hidden = true; // bytes, not text: deleting is all it offers
    line.append(edit, linkButton('delete', 'delete', () => this.startChanging(e, 'delete')));
    return line;
  }

  /** The body of a message being edited: its text in a box, saved with Enter (or the
   * button), given up with Escape. */
  editor(e, c) {
    const form = document.createElement('form');
    form.className = 'edit-form';
    const box = document.createElement('textarea');
    box.className = 'edit-input';
    box.rows = Math.max(2, Math.min(6, c.draft.split('\n').length));
    box.maxLength = 65536;
    box.value = c.draft;
    box.setAttribute('aria-label', 'Edit message');
    box.disabled = !!c.busy;
    box.addEventListener('input', () => (c.draft = box.value));
    box.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.saveEdit(e);
      } else if (ev.key === 'Escape') {
        ev.preventDefault();
        this.stopChanging(e.key);
      }
    });
    const buttons = document.createElement('div');
    buttons.className = 'acts';
    const save = linkButton(c.busy ? 'saving…' : 'save', 'save', () => {});
    save.type = 'submit';
    const cancel = linkButton('cancel', 'cancel', () => this.stopChanging(e.key));
    save.disabled = cancel.disabled = !!c.busy;
    buttons.append(save, cancel);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.saveEdit(e);
    });
    form.append(box, buttons);
    if (c.focus && !c.busy) {
      c.focus = false; // once: a redraw of the message does not take the focus back
      requestAnimationFrame(() => box.isConnected && box.focus());
    }
    return form;
  }

  startChanging(e, mode) {
    const was = this.changing && this.changing.key;
    this.changing = { key: e.key, mode, draft: e.text, busy: false, focus: true };
    if (was && was !== e.key) this.redraw(was); // one message at a time
    this.redraw(e.key);
  }

  stopChanging(key) {
    if (!this.changing || this.changing.key !== key) return;
    this.changing = null;
    this.redraw(key);
  }

  saveEdit(e) {
    const c = this.changing;
    if (!c || c.key !== e.key || c.busy) return;
    const n = this.nodes.get(e.key);
    if (!c.draft.trim()) return toast('A message cannot be empty: delete it instead.');
    if (n && c.draft === n.e.text) return this.stopChanging(e.key); // nothing changed
    this.settle(e.key, c, this.actions.edit(e.mid, c.draft), 'Not edited');
  }

  recall(e) {
    const c = this.changing;
    if (!c || c.key !== e.key || c.busy) return;
    this.settle(e.key, c, this.actions.recall(e.mid), 'Not deleted');
  }

  /** The editor (or the question) shows busy until the gateway answers: then it goes,
   * or, refused, stays as it was with the reason told. */
  settle(key, c, promise, what) {
    c.busy = true;
    this.redraw(key);
    promise.then(
      () => this.stopChanging(key),
      (err) => {
        if (this.changing !== c) return;
        c.busy = false;
        c.focus = true;
        this.redraw(key);
        toast(`${what}: ${err.code === 'conflict' ? 'it was changed on another device meanwhile; try again' : err.message}`);
      },
    );
  }

  /** The "seen by" lines of the user's messages, when receipts changed: one message's
   * receipts move the line under the user's message before it too (a reader that
   * reached the later one goes from there to here). */
  refreshSeen() {
    for (const n of this.nodes.values()) {
      if (n.e.own && n.e.state === 'stored') this.showSeen(n.el, this.seenOf(n.e.mid));
    }
  }

  /** The mid of the next of the user's stored messages after mid, or null. */
  nextOwn(mid) {
    for (let i = this.indexFor(mid) + 1; i < this.order.length; i++) {
      const n = this.nodes.get('m' + this.order[i]); // pending ones (no mid) are not found
      if (n && n.e.own && n.e.state === 'stored') return n.e.mid;
    }
    return null;
  }

  showSeen(li, text) {
    let line = li.querySelector('.seen');
    if (!text) {
      if (line) line.remove();
      return;
    }
    if (!line) {
      line = document.createElement('div');
      line.className = 'seen';
      li.append(line);
    }
    line.textContent = text; // user ids only, and as text
  }

  /** The stored messages on screen: their mids, and those of the user's own. */
  midsOnScreen() {
    const all = [];
    const own = [];
    for (const el of this.onScreen) {
      const mid = Number(el.dataset.mid);
      if (!mid) continue;
      all.push(mid);
      if (el.classList.contains('own')) own.push(mid);
    }
    return { all, own };
  }

  markFirstUnread(mid) {
    for (const el of this.list.querySelectorAll('.first-unread')) el.classList.remove('first-unread');
    const n = mid ? this.nodes.get('m' + mid) : null;
    if (n) n.el.classList.add('first-unread');
    return n ? n.el : null;
  }

  firstSort() {
    return this.order.length ? this.order[0] : Infinity;
  }

  /** The lowest mid shown (null when no stored message is). */
  firstMid() {
    const n = this.order.length ? this.nodes.get('m' + this.order[0]) : null;
    return n ? n.e.mid : null;
  }

  /** How many messages are shown: stored ones, and the user's not stored yet (pending,
   * or refused), which have no mid. */
  counts() {
    let failed = 0;
    for (const state of this.unsent.values()) if (state === 'failed') failed++;
    return { stored: this.order.length - this.unsent.size, sending: this.unsent.size - failed, failed };
  }
}

class App {
  constructor() {
    this.client = null;
    this.stats = null;
    this.user = null;
    this.gid = null; // the group shown
    this.positioned = false; // the open view has been scrolled to its first unread
    this.messages = new MessageList($('msg-list'), $('messages'), {
      seenOf: (mid) => this.seenOf(mid),
      onScreenChanged: () => this.queueOnScreen(),
      actions: {
        retry: (cid) => this.client && this.client.retry(cid),
        discard: (cid) => this.client && this.client.discard(cid),
        edit: (mid, text) => (this.client ? this.client.edit(this.gid, mid, text) : Promise.reject(new Error('signed out'))),
        recall: (mid) => (this.client ? this.client.recall(this.gid, mid) : Promise.reject(new Error('signed out'))),
        react: (mid, key, on) => (this.client ? this.client.react(this.gid, mid, key, on) : Promise.reject(new Error('signed out'))),
      },
    });
    this.onScreenQueued = false;
    this.countdown = null;
    this.wasOnline = false;
    this.bindStatic();
    const s = loadSession();
    if (s) this.startSession(s.user, s.token);
    else this.showSignIn();
  }

  // ---- sign-in ------------------------------------------------------------------------

  showSignIn(error = '') {
    $('app').hidden = true;
    $('signin').hidden = false;
    $('signin-error').textContent = error;
    const name = $('signin-name');
    if (!name.value) {
      try {
        name.value = localStorage.getItem(LAST_USER_KEY) || '';
      } catch {
        /* no storage */
      }
    }
    name.focus();
  }

  async signIn(user) {
    $('signin-error').textContent = '';
    if (!isValidId(user)) {
      $('signin-error').textContent = 'A name is 1 to 64 characters: letters, digits, _ . : -';
      return;
    }
    $('signin-button').disabled = true;
    try {
      const token = await demoLogin(user);
      saveSession({ user, token });
      this.startSession(user, token);
    } catch (e) {
      $('signin-error').textContent = e.message;
    } finally {
      $('signin-button').disabled = false;
    }
  }

  startSession(user, token) {
    this.user = user;
    this.wasOnline = false; // this session has been online: a lost connection is 'reconnecting'
    let current = token;
    $('signin').hidden = true;
    $('app').hidden = false;
    $('me').textContent = user;
    $('me').title = `signed in as ${user}`;
    this.setView('list');
    const client = new GwClient({
      url: wsUrl(),
      // The token of this tab; when the gateway refuses it (expired, or a gateway with
      // another secret), demo mode gives a fresh one for the same name.
      getToken: async ({ refresh, signedOut }) => {
        // Signed out by the application (4003): the user is out, back to the sign-in form.
        if (signedOut) throw new Error('you were signed out');
        if (refresh) {
          current = await demoLogin(user);
          saveSession({ user, token: current });
        }
        return current;
      },
    });
    this.client = client;
    window.gw = { client, app: this }; // for the browser tests and the curious
    client.addEventListener('state', () => this.renderConn());
    client.addEventListener('store', () => this.renderConn());
    client.addEventListener('groups', () => this.renderGroups());
    client.addEventListener('view', (e) => this.renderView(e.detail));
    client.addEventListener('notice', (e) => this.notice(e.detail));
    client.addEventListener('joined', (e) => {
      if (this.joining === e.detail.gid) {
        this.joining = null;
        this.openGroup(e.detail.gid);
      }
    });
    client.addEventListener('auth', (e) => this.signOut(`Please sign in again: ${e.detail.reason}.`));
    client.addEventListener('receipts', (e) => {
      if (e.detail.gid === this.gid) this.messages.refreshSeen();
    });
    client.addEventListener('presence', (e) => {
      if (e.detail.gid === this.gid) this.renderPresence();
    });
    client.addEventListener('typing', (e) => {
      if (e.detail.gid === this.gid) this.renderTyping();
    });
    if (!this.stats) {
      this.stats = new StatsPanel($('stats'), {
        shouldPoll: () => !document.hidden && $('stats').offsetParent !== null && this.client && this.client.state === 'online',
      });
      this.stats.start();
    }
    this.renderGroups();
    client.start();
  }

  signOut(message = '') {
    if (this.client) this.client.stop();
    this.client = null;
    window.gw = undefined;
    this.gid = null;
    this.messages.clear();
    $('chat-view').hidden = true;
    $('chat-empty').hidden = false;
    $('group-list').replaceChildren();
    saveSession(null);
    this.showSignIn(message);
  }

  // ---- static wiring --------------------------------------------------------------------

  bindStatic() {
    $('signin-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.signIn($('signin-name').value.trim());
    });
    $('signout').addEventListener('click', () => this.signOut());
    $('conn-retry').addEventListener('click', () => this.client && this.client.reconnectNow());
    $('back').addEventListener('click', () => {
      if (this.gid) this.closeGroup();
      this.setView('list');
    });
    $('stats-toggle').addEventListener('click', () => {
      const showing = $('app').dataset.view === 'stats';
      this.setView(showing ? (this.gid ? 'chat' : 'list') : 'stats');
    });
    $('join-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const gid = $('join-gid').value.trim();
      if (!isValidId(gid)) {
        toast('A group name is 1 to 64 characters: letters, digits, _ . : -');
        return;
      }
      if (!this.client) return;
      if (this.client.groups.has(gid)) {
        this.openGroup(gid);
      } else {
        this.joining = gid;
        this.client.join(gid);
      }
      $('join-gid').value = '';
    });
    $('group-list').addEventListener('click', (e) => {
      const li = e.target.closest('li[data-gid]');
      if (li) this.openGroup(li.dataset.gid);
    });
    $('leave').addEventListener('click', () => {
      if (this.client && this.gid) this.client.leave(this.gid);
    });
    $('older-btn').addEventListener('click', () => this.client && this.client.loadOlder());
    $('messages').addEventListener('scroll', () => this.maybeLoadOlder(), { passive: true });
    const input = $('composer-input');
    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      this.sendFromComposer();
    });
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendFromComposer();
      }
    });
    input.addEventListener('input', () => {
      this.autosize();
      // The others see "typing…": the client sends it at most once every 2 s.
      if (this.client && this.gid && input.value.trim()) this.client.typing(this.gid);
    });
    // Leaving the page or hiding it is leaving the group view: ack at once.
    window.addEventListener('pagehide', () => this.client && this.client.flushOpen('leave'));
    document.addEventListener('visibilitychange', () => {
      if (!this.client) return;
      if (document.hidden) this.client.flushOpen('leave');
      else {
        this.client.refreshGroups(); // counts may have moved in another tab or device
        this.queueOnScreen(); // what is on screen is seen now
      }
    });
    window.addEventListener('online', () => this.client && this.client.reconnectNow());
  }

  setView(view) {
    $('app').dataset.view = view;
    $('stats-toggle').setAttribute('aria-pressed', String(view === 'stats'));
    if (view === 'stats' && this.stats) this.stats.render();
  }

  // ---- connection -----------------------------------------------------------------------

  /** The pill in the top bar: the connection, and while online what the user's sends
   * say of the gateway's store. Once this session has been online, a lost connection is
   * "reconnecting…" (the client retries by itself with its backoff; the reason and the
   * next try follow), not a bare "offline": nothing needs doing, and messages wait. */
  renderConn() {
    const client = this.client;
    if (!client) return;
    const { state, reason, retryAt, storeState } = client;
    if (state === 'online') this.wasOnline = true;
    const conn = $('conn');
    conn.dataset.state = state;
    // The store, only while online ('ok' otherwise): waiting sends are what it is about.
    if (state === 'online' && storeState !== 'ok') conn.dataset.store = storeState;
    else delete conn.dataset.store;
    clearInterval(this.countdown);
    const text = $('conn-text');
    $('conn-retry').hidden = state !== 'offline';
    this.renderPresence(); // not known while offline; subscribed again once online
    conn.title = reason || state;
    if (state === 'online' && storeState === 'unavailable') {
      // The gateway refused a send with `unavailable`: its store (its database, or its
      // disk) does not take writes now. The client sends it again until it does.
      text.textContent = 'online · waiting for the database';
      conn.title = 'The gateway cannot store messages right now (its database is away); yours are sent again until it can.';
    } else if (state === 'online' && storeState === 'slow') {
      // A send unanswered for a few seconds on a live connection: the gateway confirms
      // only what is stored, so it is most likely waiting for its store; the protocol
      // does not say, so neither does the page.
      text.textContent = 'online · not confirmed yet';
      conn.title = 'A message sent a few seconds ago has not been confirmed yet: the gateway confirms a message once it is stored.';
    } else if (state === 'online') text.textContent = 'online';
    else if (state === 'connecting') text.textContent = this.wasOnline ? 'reconnecting…' : 'connecting…';
    else if (state === 'stopped') text.textContent = 'signed out';
    else {
      const tick = () => {
        const s = Math.max(0, Math.ceil((retryAt - Date.now()) / 1000));
        const why = reason ? ` (${reason})` : '';
        text.textContent = this.wasOnline ? `reconnecting…${why} · next try in ${s} s` : `offline${why}, retry in ${s} s`;
      };
      tick();
      this.countdown = setInterval(tick, 500);
    }
  }

  notice({ kind, code, msg }) {
    const what = { join: 'Join', leave: 'Leave', send: 'Send', enter: 'Opening the group', after: 'Pulling', before: 'Loading older messages' }[kind] || 'The gateway';
    toast(`${what}: ${code}${msg ? ': ' + msg : ''}`);
  }

  // ---- groups -------------------------------------------------------------------------

  renderGroups() {
    if (!this.client) return;
    const groups = this.client.groupList();
    const ul = $('group-list');
    const items = groups.map((g) => {
      const li = document.createElement('li');
      li.dataset.gid = g.gid;
      li.dataset.unread = String(g.unread);
      if (g.open) li.classList.add('open');
      if (g.unread > 0) li.classList.add('unread');
      const b = document.createElement('button');
      b.type = 'button';
      const name = document.createElement('span');
      name.className = 'name';
      name.textContent = g.gid;
      b.append(name);
      // A count only when there is something unread: a "0" on every read group is noise.
      if (g.unread > 0) {
        const badge = document.createElement('span');
        badge.className = 'badge';
        badge.dataset.count = String(g.unread);
        badge.textContent = String(g.unread);
        badge.title = `${g.unread} unread of ${g.lastMid}`;
        b.append(badge);
      } else b.title = `${g.lastMid} messages, none unread`;
      li.append(b);
      return li;
    });
    ul.replaceChildren(...items);
    $('groups-empty').hidden = groups.length > 0;
    // The gateway signed in without a database's groups (a shard away): said until the
    // whole list comes.
    $('groups-partial').hidden = !this.client.groupsPartial;
    if (this.gid && !this.client.groups.has(this.gid)) {
      // Left (here or in another tab): the view goes.
      this.gid = null;
      this.messages.clear();
      $('chat-view').hidden = true;
      $('chat-empty').hidden = false;
      if ($('app').dataset.view === 'chat') this.setView('list');
    }
    if (this.gid) this.renderChatInfo();
    document.title = this.totalUnread(groups) ? `(${this.totalUnread(groups)}) gw demo` : 'gw demo: group chat';
  }

  totalUnread(groups) {
    return groups.reduce((s, g) => s + g.unread, 0);
  }

  // ---- the group view -------------------------------------------------------------------

  openGroup(gid) {
    if (!this.client || !this.client.groups.has(gid)) return;
    this.setView('chat');
    if (this.gid === gid) return;
    if (this.gid) this.leavePeers(this.gid);
    this.gid = gid;
    this.positioned = false;
    this.messages.clear();
    $('chat-empty').hidden = true;
    $('chat-view').hidden = false;
    $('chat-title').textContent = gid;
    this.client.open(gid); // reports a view reset, then pages
    this.renderView({ gid, reset: true, upserts: [], removes: [], meta: this.client.viewMeta(gid) });
    // Who is online here, kept current while the group is open (the client subscribes
    // again after a reconnect); the reply and the changes come as 'presence' events.
    this.client.presence(gid, { subscribe: true }).catch(() => {});
    this.renderPresence();
    this.renderTyping();
    if (matchMedia('(min-width: 720px)').matches) $('composer-input').focus();
  }

  /** The group view goes: no more receipts or presence of it. */
  leavePeers(gid) {
    if (!this.client) return;
    this.client.unwatch(gid);
    if (this.client.groups.has(gid)) this.client.presence(gid, { subscribe: false }).catch(() => {});
  }

  closeGroup() {
    if (this.gid) this.leavePeers(this.gid);
    if (this.client) this.client.close();
    this.gid = null;
    this.messages.clear();
    $('chat-view').hidden = true;
    $('chat-empty').hidden = false;
  }

  renderView({ gid, reset, upserts, removes, meta }) {
    if (gid !== this.gid || !this.client) return;
    const sc = $('messages');
    const nearBottom = sc.scrollHeight - sc.scrollTop - sc.clientHeight < NEAR_BOTTOM_PX;
    const prepending = upserts.length > 0 && upserts.every((e) => e.sort < this.messages.firstSort()) && this.messages.order.length > 0;
    const prevHeight = sc.scrollHeight;
    const prevTop = sc.scrollTop;
    if (reset) {
      this.messages.clear();
      for (const e of this.client.viewEntries(gid)) this.messages.upsert(e);
    }
    for (const k of removes) this.messages.remove(k);
    for (const e of upserts) this.messages.upsert(e);
    const unreadEl = this.messages.markFirstUnread(meta.firstUnread);
    this.renderOlder(meta);
    this.renderChatInfo(meta);
    if (!this.positioned && !meta.catchingUp) {
      // First position of a freshly opened view: at the first unread message if there
      // was one, else at the newest.
      this.positioned = true;
      if (unreadEl) {
        // Room above it for the "new messages" mark; near the top anyway: the very top.
        const top = unreadEl.offsetTop - 48; // offsetParent: the scroller (position: relative)
        sc.scrollTop = top < 80 ? 0 : top;
      }
      else sc.scrollTop = sc.scrollHeight;
    } else if (prepending) {
      sc.scrollTop = prevTop + (sc.scrollHeight - prevHeight); // keep what was on screen in place
    } else if (nearBottom || upserts.some((e) => e.state === 'pending' && e.own)) {
      sc.scrollTop = sc.scrollHeight;
    }
    // Not enough to fill the screen yet: older history, without waiting for a scroll.
    requestAnimationFrame(() => this.maybeLoadOlder());
    // A message on screen may have become stored (a mid to mark read, receipts to watch).
    this.queueOnScreen();
  }

  // ---- what members see of each other ------------------------------------------------

  queueOnScreen() {
    if (this.onScreenQueued) return;
    this.onScreenQueued = true;
    setTimeout(() => {
      this.onScreenQueued = false;
      this.onScreenChanged();
    }, 100);
  }

  /** The messages on screen changed (a scroll, new ones, the page shown again): those
   * the person can see are read, up to the view's watermark (a message past a hole is
   * not counted before the hole is filled); the receipts of the user's own ones there
   * are watched. Not while a freshly opened view fills: its pages scroll by before it
   * settles at the first unread message, and nobody saw them. */
  onScreenChanged() {
    if (!this.client || !this.gid) return;
    const { all, own } = this.messages.midsOnScreen();
    const meta = this.client.viewMeta(this.gid);
    if (all.length && this.positioned && !document.hidden && meta.w !== null && meta.w !== undefined) {
      const to = Math.min(Math.max(...all), meta.w);
      if (to > 0) this.client.markRead(this.gid, to);
    }
    // Also the user's next message below the screen: the line under the last one on
    // screen leaves out whoever reached that one (seenText).
    const below = own.length ? this.messages.nextOwn(Math.max(...own)) : null;
    this.client.watch(this.gid, below ? [...own, below] : own);
  }

  seenOf(mid) {
    const g = this.client && this.client.groups.get(this.gid);
    if (!g) return '';
    const mine = g.read !== null ? g.read : g.ack; // a user that never sent a read counts by its ack
    const next = this.messages.nextOwn(mid);
    // Not known yet (not watched, or its answer on the way): nobody is taken out.
    const later = next ? this.client.receiptsOf(this.gid, next) : undefined;
    return seenText(this.client.receiptsOf(this.gid, mid), later, this.user, mine);
  }

  renderPresence() {
    const box = $('presence');
    const p = this.client && this.gid && this.client.state === 'online' ? this.client.presenceOf(this.gid) : undefined;
    if (!p) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    $('presence-count').textContent = `${p.online} of ${p.of} online`;
    const others = (p.members || []).filter((m) => m.online && m.uid !== this.user).sort((a, b) => (a.uid < b.uid ? -1 : 1));
    const items = others.slice(0, PRESENCE_NAMES).map((m) => {
      const li = document.createElement('li');
      li.dataset.uid = m.uid;
      li.dataset.online = 'true';
      li.textContent = m.uid;
      return li;
    });
    if (others.length > PRESENCE_NAMES) {
      const li = document.createElement('li');
      li.className = 'more';
      li.textContent = `+${others.length - PRESENCE_NAMES}`;
      items.push(li);
    }
    $('presence-list').replaceChildren(...items);
    const offline = (p.members || []).filter((m) => !m.online);
    box.title = offline.length
      ? 'Not online: ' + offline.map((m) => `${m.uid} (${m.lastSeen ? 'last seen ' + new Date(m.lastSeen).toLocaleString() : 'never seen'})`).join(', ')
      : '';
  }

  renderTyping() {
    $('typing').textContent = this.client && this.gid ? typingText(this.client.typingIn(this.gid)) : '';
  }

  /** The top of the history: a button for older messages, or where it ends: the start
   * of the group, or its horizon (older messages were deleted by its retention). */
  renderOlder(meta) {
    const older = $('older');
    const btn = $('older-btn');
    let text = '';
    const settled = !meta.hasOlder && meta.w !== null && meta.w !== undefined && !meta.catchingUp;
    if (meta.loadingOlder) text = 'Loading older messages…';
    else if (settled && meta.olderGone) text = 'Older messages are no longer kept';
    else if (settled) text = `This is the start of #${this.gid}.`;
    btn.hidden = !meta.hasOlder || meta.loadingOlder;
    older.dataset.state = meta.loadingOlder ? 'loading' : meta.hasOlder ? 'more' : meta.olderGone ? 'gone' : 'start';
    if (older.firstChild && older.firstChild.nodeType === Node.TEXT_NODE) older.firstChild.remove();
    if (text) older.prepend(document.createTextNode(text));
  }

  /** "20 messages · 20 loaded", and the user's messages not stored yet apart ("1
   * sending"): those have no mid, so they are not among the group's messages yet, and
   * counting them as loaded made "7 messages · 8 loaded". The group's messages are
   * those from its horizon (older ones were deleted by its retention) to its last mid,
   * or from the oldest this view still holds when it got them before they were deleted:
   * every stored message shown is one of them, so loaded is never more. */
  renderChatInfo(meta = this.client && this.gid ? this.client.viewMeta(this.gid) : null) {
    if (!meta) return;
    const { stored, sending, failed } = this.messages.counts();
    const from = Math.min(meta.firstMid || 1, this.messages.firstMid() || Infinity);
    const total = Math.max(0, meta.lastMid - from + 1);
    const parts = [`${total} ${total === 1 ? 'message' : 'messages'}`, `${stored} loaded`];
    if (sending) parts.push(`${sending} sending`);
    if (failed) parts.push(`${failed} not sent`);
    if (meta.catchingUp) parts.push('pulling…');
    $('chat-info').textContent = parts.join(' · ');
  }

  maybeLoadOlder() {
    if (!this.client || !this.gid || !this.positioned) return;
    const sc = $('messages');
    if (sc.scrollTop < NEAR_TOP_PX || sc.scrollHeight <= sc.clientHeight + 10) this.client.loadOlder();
  }

  sendFromComposer() {
    const input = $('composer-input');
    const text = input.value;
    if (!text.trim() || !this.client || !this.gid) return;
    try {
      this.client.send(this.gid, text);
      input.value = '';
      this.autosize();
    } catch (e) {
      toast(e.message);
    }
  }

  autosize() {
    const t = $('composer-input');
    t.style.height = 'auto';
    t.style.height = Math.min(t.scrollHeight + 2, 128) + 'px';
  }
}

window.gwBooted = true;
new App();
