// The client (src/client.js) on its own, in node, against a scripted fake WebSocket: the
// rules that the browser tests can only see from outside, checked frame by frame. Fast,
// and no browser or gateway needed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encode, decode } from '@msgpack/msgpack';
import { GwClient, backoffDelay, makeCid, isValidId } from '../src/index.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A WebSocket that the test plays the gateway for. */
class FakeSocket {
  static all = [];
  constructor(url, protocol) {
    this.url = url;
    this.protocol = protocol;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.all.push(this);
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen && this.onopen();
    });
  }
  send(bytes) {
    this.sent.push(decode(bytes));
  }
  close(code = 1000) {
    this.readyState = 3;
    this.onclose && this.onclose({ code, reason: '' });
  }
  /** The gateway sends one frame: a map, or an array of maps (a batch). */
  push(value) {
    const b = encode(value);
    this.onmessage({ data: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) });
  }
  drop(code = 1006) {
    this.readyState = 3;
    this.onclose({ code, reason: '' });
  }
  take(t) {
    const out = this.sent.filter((m) => m.t === t);
    this.sent = this.sent.filter((m) => m.t !== t);
    return out;
  }
}

const welcome = (groups, extra = {}) => ({ t: 'welcome', uid: 'u1', sid: 's1', ts: 1, ack_every: 3, ack_delay_ms: 60, max_body: 1000, groups, ...extra });
const msg = (gid, mid, body = `m${mid}`) => ({ t: 'msg', gid, mid, from: 'u2', ts: 1000 + mid, body });

async function online(groups) {
  FakeSocket.all = [];
  const client = new GwClient({ url: 'ws://test/ws', getToken: async () => 'tok', WebSocketImpl: FakeSocket });
  client.start();
  await sleep(0);
  await sleep(0);
  const ws = FakeSocket.all[0];
  assert.deepEqual(ws.take('hello'), [{ t: 'hello', token: 'tok' }]);
  assert.equal(ws.protocol, 'gw.v1');
  ws.push(welcome(groups));
  assert.equal(client.state, 'online');
  return { client, ws };
}

/** Open gid and answer its `enter` with msgs after the ack. */
function enter(client, ws, gid, lastMid, msgs) {
  client.open(gid);
  const [e] = ws.take('enter');
  assert.equal(e.gid, gid);
  ws.push({ t: 'page', rid: e.rid, gid, last_mid: lastMid, more: false, msgs: msgs.map((mid) => ({ mid, from: 'u2', ts: mid, body: `m${mid}` })) });
}

test('backoff: exponential steps with jitter, capped', () => {
  for (let a = 0; a < 12; a++) {
    const step = Math.min(15000, 500 * 2 ** a);
    assert.equal(backoffDelay(a, () => 0), step / 2);
    assert.equal(backoffDelay(a, () => 1), step);
    const d = backoffDelay(a);
    assert.ok(d >= step / 2 && d <= step, `attempt ${a}: ${d}`);
  }
  const cid = makeCid();
  assert.ok(isValidId(cid), cid);
  assert.notEqual(makeCid(), cid);
});

test('welcome gives unread counts and nothing is pulled until a group is opened', async () => {
  const { client, ws } = await online([
    { gid: 'a', last_mid: 10, ack: 4, unread: 6 },
    { gid: 'b', last_mid: 3, ack: 3, unread: 0 },
  ]);
  assert.deepEqual(
    client.groupList().map((g) => [g.gid, g.unread]),
    [
      ['a', 6],
      ['b', 0],
    ],
  );
  ws.push(msg('b', 4)); // a live message for a group that is not open: counted, not acked
  assert.equal(client.groupList()[1].unread, 1);
  assert.deepEqual(ws.sent, [], 'no enter, pull or ack');
  client.stop();
});

test('acks: after ack_every messages (once per frame), after ack_delay_ms, at once on leaving', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 0, ack: 0, unread: 0 }]);
  enter(client, ws, 'g', 0, []);
  // A batch frame of 7 pushes: one ack at its end, for all 7 (7 >= ack_every 3).
  ws.push([1, 2, 3, 4, 5, 6, 7].map((m) => msg('g', m)));
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 7 }]);
  // One more: nothing at once, then after ack_delay_ms.
  ws.push(msg('g', 8));
  assert.deepEqual(ws.take('ack'), []);
  await sleep(90);
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 8 }]);
  // Two more, then the view is left: acked at once.
  ws.push([msg('g', 9), msg('g', 10)]);
  assert.deepEqual(ws.take('ack'), []);
  client.close();
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 10 }]);
  await sleep(90);
  assert.deepEqual(ws.take('ack'), [], 'no timer left behind');
  assert.deepEqual(
    client.ackLog.map((a) => a.reason),
    ['count', 'delay', 'leave'],
  );
  client.stop();
});

test('a hole in live mids: only the contiguous watermark is acked, and a pull fills it', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 5, ack: 5, unread: 0 }]);
  enter(client, ws, 'g', 5, []);
  ws.take('pull'); // older history, asked for by nothing here: none expected, but ignore
  ws.push([msg('g', 6), msg('g', 8), msg('g', 9), msg('g', 10)]); // 7 is missing
  const pulls = ws.take('pull');
  assert.equal(pulls.length, 1);
  assert.equal(pulls[0].after, 6, 'pull after the watermark');
  assert.equal(pulls[0].before, undefined);
  assert.deepEqual(ws.take('ack'), [], 'no ack past the hole by count');
  await sleep(90);
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 6 }], 'the delay ack stops at the hole');
  // The pull's page brings 7 (and repeats 8..10: dropped as duplicates).
  ws.push({ t: 'page', rid: pulls[0].rid, gid: 'g', last_mid: 10, more: false, msgs: [7, 8, 9, 10].map((mid) => ({ mid, from: 'u2', ts: mid, body: `m${mid}` })) });
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 10 }], 'the page is acked at once');
  assert.deepEqual(
    client.viewEntries('g').map((e) => e.mid),
    [6, 7, 8, 9, 10],
  );
  assert.equal(client.counters.duplicates, 3);
  client.stop();
});

test('dedup by (gid, mid): a message re-sent in any way shows once', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 0, ack: 0, unread: 0 }]);
  enter(client, ws, 'g', 0, []);
  ws.push([msg('g', 1), msg('g', 2), msg('g', 1, 'other body')]);
  ws.push(msg('g', 2));
  assert.deepEqual(
    client.viewEntries('g').map((e) => [e.mid, e.text]),
    [
      [1, 'm1'],
      [2, 'm2'],
    ],
  );
  client.stop();
});

test('notify: the open group pulls after its watermark; another group only counts', async () => {
  const { client, ws } = await online([
    { gid: 'g', last_mid: 2, ack: 2, unread: 0 },
    { gid: 'h', last_mid: 0, ack: 0, unread: 0 },
  ]);
  enter(client, ws, 'g', 2, []);
  ws.take('pull');
  ws.push([
    { t: 'notify', gid: 'g', last_mid: 40 },
    { t: 'notify', gid: 'h', last_mid: 7 },
  ]);
  const pulls = ws.take('pull');
  assert.deepEqual(
    pulls.map((p) => [p.gid, p.after]),
    [['g', 2]],
  );
  assert.equal(client.groupList().find((g) => g.gid === 'h').unread, 7);
  // Pages follow one at a time until the group's last mid.
  ws.push({ t: 'page', rid: pulls[0].rid, gid: 'g', last_mid: 40, more: true, msgs: Array.from({ length: 20 }, (_, i) => ({ mid: 3 + i, from: 'u2', ts: 1, body: 'x' })) });
  const next = ws.take('pull');
  assert.deepEqual(
    next.map((p) => p.after),
    [22],
  );
  client.stop();
});

test('own message: pending, then stored with its mid; after a reconnect sent again with the same cid', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 0, ack: 0, unread: 0 }]);
  enter(client, ws, 'g', 0, []);
  const cid = client.send('g', 'hello');
  const [s1] = ws.take('send');
  assert.equal(s1.cid, cid);
  assert.deepEqual(
    client.viewEntries('g').map((e) => e.state),
    ['pending'],
  );
  // The connection drops before `sent`: offline, a reconnect is scheduled.
  ws.drop(1006);
  assert.equal(client.state, 'offline');
  const wait = client.retryAt - Date.now();
  assert.ok(wait >= 200 && wait <= 550, `first retry in ${wait} ms`);
  await sleep(wait + 50);
  await sleep(0);
  const ws2 = FakeSocket.all[1];
  assert.ok(ws2, 'reconnected');
  assert.equal(ws2.take('hello').length, 1);
  ws2.push(welcome([{ gid: 'g', last_mid: 1, ack: 0, unread: 1 }]));
  // The gateway had stored it (mid 1): the resend carries the same cid and gets the
  // first `sent` back; the catch-up pull brings mid 1 too; it shows once, as stored.
  const [s2] = ws2.take('send');
  assert.equal(s2.cid, cid, 'same cid');
  const [p] = ws2.take('pull');
  assert.equal(p.after, 0);
  ws2.push({ t: 'page', rid: p.rid, gid: 'g', last_mid: 1, more: false, msgs: [{ mid: 1, from: 'u1', ts: 5, body: 'hello' }] });
  ws2.push({ t: 'sent', rid: s2.rid, gid: 'g', cid, mid: 1, ts: 5 });
  assert.deepEqual(
    client.viewEntries('g').map((e) => [e.mid, e.state, e.text]),
    [[1, 'stored', 'hello']],
  );
  client.stop();
});

// ---- what members see of each other: reads, receipts, presence, typing ----------------

test('reads: cumulative, batched like acks, counted for unread, sent again when the gateway lost them', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 10, ack: 4, unread: 6 }]);
  assert.equal(client.groupList()[0].read, null, 'no read sent yet: unread counts from the ack');
  client.markRead('g', 2);
  assert.deepEqual(ws.take('read'), [], 'not at once');
  assert.equal(client.groupList()[0].unread, 8, 'once reads are used, unread counts from the read, at once');
  client.markRead('g', 1); // lower: changes nothing
  await sleep(90);
  assert.deepEqual(ws.take('read').map((r) => r.reads), [{ g: 2 }], 'after ack_delay_ms');
  client.markRead('g', 8); // moves 6 >= ack_every 3: at once
  assert.deepEqual(ws.take('read').map((r) => r.reads), [{ g: 8 }]);
  client.markRead('g', 8);
  client.markRead('g', 9);
  client.close(); // nothing open; leaving a view sends the reads anyway
  client.flushOpen();
  assert.deepEqual(ws.take('read').map((r) => r.reads), [{ g: 9 }]);
  await sleep(90);
  assert.deepEqual(ws.take('read'), [], 'no timer left behind');
  assert.deepEqual(client.groupList()[0], { gid: 'g', lastMid: 10, unread: 1, read: 9, open: false });
  // The gateway restarted and lost the last batch: the welcome has read 8, the page
  // sends 9 again.
  ws.drop(1006);
  await sleep(client.retryAt - Date.now() + 50);
  await sleep(0);
  const ws2 = FakeSocket.all[1];
  ws2.take('hello');
  ws2.push(welcome([{ gid: 'g', last_mid: 10, ack: 4, unread: 2, read: 8 }]));
  assert.deepEqual(ws2.take('read').map((r) => r.reads), [{ g: 9 }]);
  client.stop();
});

test("reads are shared with the user's other tabs", async () => {
  const { client: tab1, ws } = await online([{ gid: 'g', last_mid: 10, ack: 0, unread: 10 }]);
  const { client: tab2 } = await online([{ gid: 'g', last_mid: 10, ack: 0, unread: 10 }]);
  tab1.markRead('g', 7); // 7 >= ack_every: sent at once, and told to the other tab
  assert.deepEqual(ws.take('read').map((r) => r.reads), [{ g: 7 }]);
  let n = 0;
  while (tab2.groupList()[0].read !== 7 && n++ < 50) await sleep(10);
  assert.deepEqual([tab2.groupList()[0].read, tab2.groupList()[0].unread], [7, 3]);
  tab1.stop();
  tab2.stop();
});

test('a read from the welcome: unread from it, and the view starts after it', async () => {
  const { client, ws } = await online([
    { gid: 'g', last_mid: 10, ack: 10, unread: 4, read: 6 },
    { gid: 'h', last_mid: 5, ack: 2, unread: 3 },
  ]);
  assert.deepEqual(
    client.groupList().map((g) => [g.gid, g.unread, g.read]),
    [
      ['g', 4, 6],
      ['h', 3, null],
    ],
  );
  // The devices hold up to 10, the person saw up to 6: the view pulls after 6, and its
  // first unread is 7.
  client.open('g');
  assert.deepEqual(ws.take('enter'), []);
  const [p] = ws.take('pull');
  assert.equal(p.after, 6);
  ws.push({ t: 'page', rid: p.rid, gid: 'g', last_mid: 10, more: false, msgs: [7, 8, 9, 10].map((mid) => ({ mid, from: 'u2', ts: mid, body: `m${mid}` })) });
  assert.equal(client.viewMeta('g').firstUnread, 7);
  assert.deepEqual(ws.take('ack'), [], 'nothing to ack: the gateway has 10');
  // Without a read, the view enters as before.
  client.open('h');
  assert.equal(ws.take('enter').length, 1);
  client.stop();
});

test('receipts: a promise and an event; errors and a lost connection reject it', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 10, ack: 10, unread: 0 }]);
  const events = [];
  client.addEventListener('receipts', (e) => events.push(e.detail));
  const p = client.receipts('g', 3);
  const [q] = ws.take('receipts');
  assert.deepEqual({ ...q, rid: 0 }, { t: 'receipts', gid: 'g', mid: 3, rid: 0 });
  ws.push({ t: 'receipts', rid: q.rid, gid: 'g', mid: 3, delivered: 2, read: 1, of: 3, readers: ['u2'] });
  const r = await p;
  assert.deepEqual(r, { gid: 'g', mid: 3, delivered: 2, read: 1, of: 3, readers: ['u2'] });
  assert.deepEqual(events, [r]);
  const bad = client.receipts('nope', 1);
  const [q2] = ws.take('receipts');
  ws.push({ t: 'err', rid: q2.rid, gid: 'nope', code: 'not_member', msg: 'not a member of this group' });
  await assert.rejects(bad, (e) => e.code === 'not_member');
  const lost = client.receipts('g', 4);
  ws.drop(1006);
  await assert.rejects(lost, (e) => e.code === 'disconnected');
  await assert.rejects(client.receipts('g', 4), (e) => e.code === 'offline');
  client.stop();
});

test('watch: receipts asked for at once, again when cursors move past them, pushes kept; again after a reconnect', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 30, ack: 30, unread: 0 }]);
  const events = [];
  client.addEventListener('receipts', (e) => events.push([e.detail.mid, e.detail.read]));
  const cursors = [];
  client.addEventListener('cursors', (e) => cursors.push(e.detail));
  client.watch('g', [5, 3, 5]);
  assert.deepEqual(ws.take('watch'), [{ t: 'watch', gid: 'g', mids: [3, 5] }]);
  const asked = ws.take('receipts');
  assert.deepEqual(
    asked.map((q) => q.mid),
    [3, 5],
  );
  for (const q of asked) ws.push({ t: 'receipts', rid: q.rid, gid: 'g', mid: q.mid, delivered: 1, read: 0, of: 2, readers: [] });
  assert.deepEqual(client.receiptsOf('g', 5), { gid: 'g', mid: 5, delivered: 1, read: 0, of: 2, readers: [] });
  client.watch('g', [3, 5]);
  assert.deepEqual(ws.sent, [], 'the same mids: nothing sent');
  // A small group's push: u2 read up to 4, so only mid 3 may have changed.
  ws.push({ t: 'cursors', gid: 'g', cursors: [{ uid: 'u2', ack: 4, read: 4 }] });
  assert.deepEqual(cursors, [{ gid: 'g', cursors: [{ uid: 'u2', ack: 4, read: 4 }] }]);
  const again = ws.take('receipts');
  assert.deepEqual(
    again.map((q) => q.mid),
    [3],
  );
  ws.push({ t: 'receipts', rid: again[0].rid, gid: 'g', mid: 3, delivered: 2, read: 1, of: 2, readers: ['u2'] });
  assert.deepEqual(client.receiptsOf('g', 3).readers, ['u2']);
  // A large group's push: receipts without a rid.
  ws.push({ t: 'receipts', gid: 'g', mid: 5, delivered: 2, read: 2, of: 2 });
  assert.equal(client.receiptsOf('g', 5).read, 2);
  assert.deepEqual(events, [
    [3, 0],
    [5, 0],
    [3, 1],
    [5, 2],
  ]);
  // More than 16 mids: the newest 16.
  client.watch('g', Array.from({ length: 20 }, (_, i) => i + 1));
  const [w] = ws.take('watch');
  assert.deepEqual(w.mids, Array.from({ length: 16 }, (_, i) => i + 5));
  assert.equal(ws.take('receipts').length, 15, 'asked for the new ones only (6 to 20)');
  assert.equal(client.receiptsOf('g', 3), undefined, 'no longer watched');
  // A reconnect: watched again, and asked again.
  ws.drop(1006);
  await sleep(client.retryAt - Date.now() + 50);
  await sleep(0);
  const ws2 = FakeSocket.all[1];
  ws2.take('hello');
  ws2.push(welcome([{ gid: 'g', last_mid: 30, ack: 30, unread: 0 }]));
  assert.deepEqual(ws2.take('watch'), [w]);
  assert.equal(ws2.take('receipts').length, 16);
  client.unwatch('g');
  assert.deepEqual(ws2.take('watch'), [{ t: 'watch', gid: 'g', mids: [] }]);
  client.unwatch('g');
  assert.deepEqual(ws2.sent, []);
  for (let i = 0; i < 16; i++) client.watch(`x${i}`, [1]);
  assert.throws(() => client.watch('x16', [1]), RangeError);
  client.stop();
});

test('presence: subscribed, changes applied, a large group asked again, subscribed again after a reconnect', async () => {
  const { client, ws } = await online([
    { gid: 'g', last_mid: 0, ack: 0, unread: 0 },
    { gid: 'big', last_mid: 0, ack: 0, unread: 0 },
  ]);
  const seen = [];
  client.addEventListener('presence', (e) => seen.push(e.detail));
  const p = client.presence('g', { subscribe: true });
  const [q] = ws.take('presence');
  assert.equal(q.sub, true);
  ws.push({ t: 'presence', rid: q.rid, gid: 'g', online: 1, of: 2, members: [{ uid: 'u1', online: true, last_seen: 50 }, { uid: 'u2', online: false, last_seen: 0 }] });
  assert.deepEqual(await p, { gid: 'g', online: 1, of: 2, members: [{ uid: 'u1', online: true, lastSeen: 50 }, { uid: 'u2', online: false, lastSeen: 0 }] });
  const changes = [];
  client.addEventListener('online', (e) => changes.push(e.detail));
  ws.push({ t: 'online', gid: 'g', changes: [{ uid: 'u2', online: true, last_seen: 70 }] });
  assert.deepEqual(changes, [{ gid: 'g', changes: [{ uid: 'u2', online: true, lastSeen: 70 }] }]);
  assert.deepEqual(client.presenceOf('g'), { gid: 'g', online: 2, of: 2, members: [{ uid: 'u1', online: true, lastSeen: 50 }, { uid: 'u2', online: true, lastSeen: 70 }] });
  assert.equal(seen.length, 2);
  // A member the list lacks (it joined since: the gateway's changes are about coming and
  // going) is asked for once.
  ws.push([msg('g', 1), { t: 'typing', gid: 'g', uid: 'u2', ttl_ms: 5000 }]); // u2 is listed
  assert.deepEqual(ws.take('presence'), []);
  ws.push([{ t: 'typing', gid: 'g', uid: 'u5', ttl_ms: 5000 }, { ...msg('g', 2), from: 'u5' }]);
  const [who] = ws.take('presence');
  assert.deepEqual([who.gid, who.sub], ['g', undefined]);
  ws.push({ t: 'presence', rid: who.rid, gid: 'g', online: 3, of: 3, members: [{ uid: 'u1', online: true, last_seen: 50 }, { uid: 'u2', online: true, last_seen: 70 }, { uid: 'u5', online: true, last_seen: 90 }] });
  assert.deepEqual([client.presenceOf('g').online, client.presenceOf('g').of], [3, 3]);
  // A large group: counts only; a change makes the client ask again (no sub).
  const pb = client.presence('big', { subscribe: true });
  const [qb] = ws.take('presence');
  ws.push({ t: 'presence', rid: qb.rid, gid: 'big', online: 40, of: 500 });
  assert.deepEqual(await pb, { gid: 'big', online: 40, of: 500 });
  ws.push({ t: 'online', gid: 'big', changes: [{ uid: 'u9', online: false, last_seen: 80 }] });
  const [ask] = ws.take('presence');
  assert.equal(ask.gid, 'big');
  assert.equal(ask.sub, undefined, 'asking keeps the subscription as it is');
  ws.push({ t: 'presence', rid: ask.rid, gid: 'big', online: 39, of: 500 });
  assert.equal(client.presenceOf('big').online, 39);
  // Unsubscribed: forgotten, and not subscribed again after a reconnect.
  client.presence('big', { subscribe: false }).catch(() => {});
  assert.equal(ws.take('presence')[0].sub, false);
  assert.equal(client.presenceOf('big'), undefined);
  ws.drop(1006);
  await sleep(client.retryAt - Date.now() + 50);
  await sleep(0);
  const ws2 = FakeSocket.all[1];
  ws2.take('hello');
  ws2.push(welcome([
    { gid: 'g', last_mid: 0, ack: 0, unread: 0 },
    { gid: 'big', last_mid: 0, ack: 0, unread: 0 },
  ]));
  assert.deepEqual(
    ws2.take('presence').map((x) => [x.gid, x.sub]),
    [['g', true]],
  );
  client.stop();
});

test('typing: sent at most once every 2 s a group; others shown until their ttl, or their message', async () => {
  const { client, ws } = await online([
    { gid: 'g', last_mid: 0, ack: 0, unread: 0 },
    { gid: 'h', last_mid: 0, ack: 0, unread: 0 },
  ]);
  assert.equal(client.typing('g'), true);
  assert.equal(client.typing('g'), false, 'within 2 s: dropped here');
  assert.equal(client.typing('h'), true, 'another group has its own 2 s');
  assert.deepEqual(ws.take('typing'), [{ t: 'typing', gid: 'g' }, { t: 'typing', gid: 'h' }]);
  const events = [];
  client.addEventListener('typing', (e) => events.push(e.detail.uids));
  ws.push([
    { t: 'typing', gid: 'g', uid: 'u2', ttl_ms: 60 },
    { t: 'typing', gid: 'g', uid: 'u3', ttl_ms: 5000 },
    { t: 'typing', gid: 'g', uid: 'u1', ttl_ms: 5000 }, // this user: never shown
    { t: 'typing', gid: 'nope', uid: 'u2', ttl_ms: 5000 }, // not a group of this user
  ]);
  assert.deepEqual(client.typingIn('g'), ['u2', 'u3']);
  await sleep(30);
  ws.push({ t: 'typing', gid: 'g', uid: 'u2', ttl_ms: 60 }); // again: the ttl starts again
  await sleep(40);
  assert.deepEqual(client.typingIn('g'), ['u2', 'u3'], 'renewed');
  await sleep(50);
  assert.deepEqual(client.typingIn('g'), ['u3'], 'forgotten after its ttl');
  ws.push({ t: 'msg', gid: 'g', mid: 1, from: 'u3', ts: 1, body: 'done typing' });
  assert.deepEqual(client.typingIn('g'), []);
  assert.deepEqual(events, [['u2'], ['u2', 'u3'], ['u3'], []]);
  client.stop();
});

test('an older gateway: unknown messages are ignored, and bad_type stops the new requests', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 5, ack: 5, unread: 0 }]);
  ws.push([{ t: 'something_new', gid: 'g', x: [1, 2] }, { t: 42 }, { no_t: true }]);
  assert.equal(client.state, 'online');
  client.markRead('g', 5);
  await sleep(90);
  assert.equal(ws.take('read').length, 1);
  ws.push({ t: 'err', code: 'bad_type', msg: "unknown message type" });
  const notices = [];
  client.addEventListener('notice', (e) => notices.push(e.detail));
  assert.equal(client.typing('g'), false);
  client.watch('g', [5]);
  await assert.rejects(client.receipts('g', 5), (e) => e.code === 'bad_type');
  assert.deepEqual(ws.sent, [], 'nothing more of those on this connection');
  assert.deepEqual(notices, []);
  client.stop();
});
