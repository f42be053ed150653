// The client (src/client.js) on its own, in node, against a scripted fake WebSocket: the
// rules that the browser tests can only see from outside, checked frame by frame. Fast,
// and no browser or gateway needed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeSocket, startOnline } from './fake-socket.js';
import { GwClient, backoffDelay, makeCid, isValidId } from '../src/index.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const welcome = (groups, extra = {}) => ({ t: 'welcome', uid: 'u1', sid: 's1', ts: 1, ack_every: 3, ack_delay_ms: 60, max_body: 1000, groups, ...extra });
const msg = (gid, mid, body = `m${mid}`) => ({ t: 'msg', gid, mid, from: 'u2', ts: 1000 + mid, body });

async function online(groups) {
  const { client, ws, hello } = await startOnline(welcome(groups));
  assert.deepEqual(hello, [{ t: 'hello', token: 'tok' }]);
  assert.equal(ws.protocol, 'gw.v1');
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

test("a certificate that is not trusted: reason 'tls' with the error's text, each attempt; retried until trusted", async (t) => {
  // What node's `ws` gives its onerror: an ErrorEvent whose `error` is the TLS layer's Error.
  const tlsError = (code, message) => ({ type: 'error', message, error: Object.assign(new Error(message), { code }) });
  FakeSocket.all = [];
  FakeSocket.failNext = [
    tlsError('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'),
    tlsError('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1"),
    { type: 'error', message: 'connect ECONNREFUSED', error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) },
    { type: 'error' }, // a browser's: no detail at all
  ];
  const states = [];
  const client = new GwClient({ url: 'wss://test/ws', getToken: async () => 'tok', WebSocketImpl: FakeSocket });
  client.addEventListener('state', (e) => states.push(e.detail));
  const attempt = async () => {
    await sleep(0);
    await sleep(0);
  };
  t.after(() => {
    client.stop(); // whatever happened: no retries left running into the other tests
    FakeSocket.failNext = [];
  });
  client.start();
  await attempt();
  assert.equal(client.state, 'offline');
  assert.deepEqual([client.reason, client.error], ['tls', 'self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)']);
  for (let i = 0; i < 3; i++) {
    client.reconnectNow();
    await attempt();
  }
  assert.equal(FakeSocket.all.length, 4, 'retried after each failure');
  const offline = states.filter((d) => d.state === 'offline');
  assert.deepEqual(
    offline.map((d) => [d.reason, d.error, d.attempt]),
    [
      ['tls', 'self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)', 1],
      ['tls', "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1 (ERR_TLS_CERT_ALTNAME_INVALID)", 2],
      ['connection lost', undefined, 3],
      ['connection lost', undefined, 4],
    ],
  );
  assert.ok(offline.every((d) => d.retryAt > 0));
  assert.ok(!('error' in offline[2]) && !('error' in offline[3]), 'no error field unless the reason is tls');
  // The trust fixed: the next attempt connects, and the error is gone.
  client.reconnectNow();
  await attempt();
  FakeSocket.all[4].push(welcome([]));
  assert.deepEqual([client.state, client.reason, client.error], ['online', '', undefined]);
  assert.deepEqual(states.at(-1), { state: 'online', reason: '', attempt: 4, retryAt: states.at(-1).retryAt });
  client.stop();
});

test('store state: a send refused with unavailable says so until it is stored; one unanswered for 3 s is slow', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 0, ack: 0, unread: 0 }]);
  enter(client, ws, 'g', 0, []);
  const seen = [];
  client.addEventListener('store', (e) => seen.push(e.detail.state));
  // The store is away: the gateway refuses the send; it is sent again later (same cid).
  const cid = client.send('g', 'during the failover');
  const [s1] = ws.take('send');
  assert.equal(client.storeState, 'ok', 'just sent: not late yet');
  ws.push({ t: 'err', rid: s1.rid, gid: 'g', code: 'unavailable', msg: 'the store cannot take writes now' });
  assert.equal(client.storeState, 'unavailable');
  await sleep(1100); // the first resend comes after 1 s
  const [s2] = ws.take('send');
  assert.equal(s2.cid, cid, 'sent again with the same cid');
  assert.equal(client.storeState, 'unavailable', 'still, while the resend has no answer');
  ws.push({ t: 'sent', rid: s2.rid, gid: 'g', cid, mid: 1, ts: 5 });
  assert.equal(client.storeState, 'ok', 'stored: the store is back');
  // A send with no answer at all (a commit stuck in a database that went away): slow
  // after 3 s, ok once it is answered.
  const cid2 = client.send('g', 'stuck');
  const [s3] = ws.take('send');
  await sleep(2500);
  assert.equal(client.storeState, 'ok', 'not late after 2.5 s');
  await sleep(700);
  assert.equal(client.storeState, 'slow', 'late after 3 s');
  ws.push({ t: 'sent', rid: s3.rid, gid: 'g', cid: cid2, mid: 2, ts: 6 });
  assert.equal(client.storeState, 'ok');
  assert.deepEqual(seen, ['unavailable', 'ok', 'slow', 'ok']);
  // Offline it says nothing of the store (the connection is what to tell); the pending
  // send is not late on the next connection before it has been sent on it.
  client.send('g', 'refused then cut off');
  const [s4] = ws.take('send');
  ws.push({ t: 'err', rid: s4.rid, gid: 'g', code: 'unavailable', msg: '' });
  assert.equal(client.storeState, 'unavailable');
  ws.drop(1006);
  assert.equal(client.storeState, 'ok');
  client.stop();
});

test('closed with 4013 (the gateway cannot read its database at hello): offline, reconnecting, with that reason', async () => {
  const { client, ws } = await online([]);
  ws.drop(4013);
  assert.deepEqual([client.state, client.reason], ['offline', 'gateway waiting for its database']);
  assert.ok(client.retryAt > Date.now(), 'a reconnect is scheduled');
  client.stop();
});

// ---- what members see of each other: reads, receipts, presence, typing ----------------

test('stop() from a state listener stops once (its own stopped event does not stop it again)', async () => {
  const { client } = await online([]);
  const states = [];
  client.addEventListener('state', (e) => {
    states.push(e.detail.state);
    client.stop();
  });
  client.stop();
  client.stop();
  assert.deepEqual(states, ['stopped']);
});

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
  assert.deepEqual(client.groupList()[0], { gid: 'g', lastMid: 10, firstMid: 1, unread: 1, read: 9, open: false });
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

// ---- a message's later versions: edits and recalls ------------------------------------

const edited = (gid, mid, ver, body, extra = {}) => ({ t: 'edited', gid, mid, ver, ts: 5000 + ver, from: 'u2', body, ...extra });
const recalled = (gid, mid, ver, extra = {}) => ({ t: 'recalled', gid, mid, ver, ts: 5000 + ver, from: 'u2', ...extra });
const shown = (client, gid) => client.viewEntries(gid).map((e) => [e.mid, e.text, e.ver, e.recalled]);

test('versions: each message at the highest ver seen, whatever order versions and messages come in', async () => {
  const { client, ws } = await online([
    { gid: 'g', last_mid: 2, ack: 2, unread: 0 },
    { gid: 'h', last_mid: 1, ack: 0, unread: 1 },
  ]);
  enter(client, ws, 'g', 2, []);
  const events = [];
  for (const t of ['edited', 'recalled']) client.addEventListener(t, (e) => events.push([t, e.detail.gid, e.detail.mid, e.detail.ver]));
  // Version 2 of mid 3 overtakes version 1, and both overtake the msg (version 0).
  ws.push(edited('g', 3, 2, 'm3 v2'));
  ws.push(edited('g', 3, 1, 'm3 v1'));
  ws.push(msg('g', 3));
  assert.deepEqual(shown(client, 'g'), [[3, 'm3 v2', 2, false]]);
  assert.equal(client.viewEntries('g')[0].ts, 1003, 'the message keeps the time it was sent');
  // A held message: replaced by a later version; the same version again changes nothing.
  ws.push(msg('g', 4));
  ws.push(recalled('g', 4, 1));
  ws.push(edited('g', 4, 1, 'too late'));
  assert.deepEqual(shown(client, 'g')[1], [4, '', 1, true]);
  assert.equal(client.versionOf('g', 4), 1);
  // A page carries versions: a recalled entry has no body; an entry at a later version
  // replaces the copy held (not counted as a duplicate), an older one does not.
  ws.push(msg('g', 7)); // 5 and 6 are missing: pulled
  const [p] = ws.take('pull');
  assert.equal(p.after, 4);
  const dupsBefore = client.counters.duplicates;
  ws.push({ t: 'page', rid: p.rid, gid: 'g', last_mid: 7, more: false, msgs: [
    { mid: 5, from: 'u2', ts: 1005, ver: 1, recalled: true },
    { mid: 6, from: 'u2', ts: 1006, body: 'm6' },
    { mid: 7, from: 'u2', ts: 1007, ver: 3, body: 'm7 v3' },
  ] });
  assert.deepEqual(shown(client, 'g'), [
    [3, 'm3 v2', 2, false],
    [4, '', 1, true],
    [5, '', 1, true],
    [6, 'm6', 0, false],
    [7, 'm7 v3', 3, false],
  ]);
  assert.equal(client.counters.duplicates, dupsBefore, 'a later version is not a duplicate');
  ws.push(edited('g', 7, 2, 'm7 v2')); // older than the page's: nothing
  assert.deepEqual(shown(client, 'g')[4], [7, 'm7 v3', 3, false]);
  const held = client.groups.get('g').view.held;
  assert.deepEqual(held.get(5), { mid: 5, from: 'u2', ts: 1005, ver: 1, recalled: true }, 'a tombstone: no body');
  assert.deepEqual(held.get(6), { mid: 6, from: 'u2', ts: 1006, ver: 0, recalled: false, body: 'm6' });
  // A group without a view: the version is kept, and applied when the group is opened
  // and its page (read before the edit) brings the message as sent.
  ws.push(edited('h', 1, 1, 'h1 v1'));
  assert.equal(client.versionOf('h', 1), 1);
  client.open('h');
  const [e] = ws.take('enter');
  ws.push({ t: 'page', rid: e.rid, gid: 'h', last_mid: 1, more: false, msgs: [{ mid: 1, from: 'u2', ts: 1, body: 'h1' }] });
  assert.deepEqual(shown(client, 'h'), [[1, 'h1 v1', 1, false]]);
  // Only versions newer than what was known are reported.
  assert.deepEqual(events, [
    ['edited', 'g', 3, 2],
    ['recalled', 'g', 4, 1],
    ['edited', 'h', 1, 1],
  ]);
  client.stop();
});

test('edit and recall: ver is the version held + 1, the reply resolves, errors reject, a conflict pulls the message again', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 2, ack: 0, unread: 2 }]);
  client.open('g');
  const [e] = ws.take('enter');
  ws.push({ t: 'page', rid: e.rid, gid: 'g', last_mid: 2, more: false, msgs: [
    { mid: 1, from: 'u1', ts: 1, body: 'one' },
    { mid: 2, from: 'u1', ts: 2, body: 'two, edited', ver: 1 },
  ] });
  ws.take('ack');
  const events = [];
  for (const t of ['edited', 'recalled']) client.addEventListener(t, (ev) => events.push(ev.detail));
  const notices = [];
  client.addEventListener('notice', (ev) => notices.push(ev.detail));

  const p1 = client.edit('g', 1, 'one!');
  const p2 = client.edit('g', 1, 'one!!'); // after the one still on its way
  const [f1, f2] = ws.take('edit');
  assert.deepEqual({ ...f1, rid: 0 }, { t: 'edit', gid: 'g', mid: 1, body: 'one!', ver: 1, rid: 0 });
  assert.equal(f2.ver, 2);
  ws.push({ t: 'edited', rid: f1.rid, gid: 'g', mid: 1, ver: 1, ts: 50, from: 'u1', body: 'one!' });
  ws.push({ t: 'edited', rid: f2.rid, gid: 'g', mid: 1, ver: 2, ts: 51, from: 'u1', body: 'one!!' });
  assert.deepEqual(await p1, { gid: 'g', mid: 1, ver: 1, ts: 50, from: 'u1', recalled: false, body: 'one!' });
  assert.equal((await p2).ver, 2);
  assert.deepEqual(shown(client, 'g')[0], [1, 'one!!', 2, false]);

  // Mid 2 is held at version 1: the edit makes 2. Another device of the user made 2
  // first: conflict, and the message is pulled again; the next edit makes 3.
  const p3 = client.edit('g', 2, 'two?');
  const [f3] = ws.take('edit');
  assert.equal(f3.ver, 2);
  ws.push({ t: 'err', rid: f3.rid, gid: 'g', code: 'conflict', msg: 'version 2 was made by another edit' });
  await assert.rejects(p3, (x) => x.code === 'conflict');
  const [pull] = ws.take('pull');
  assert.deepEqual([pull.gid, pull.before, pull.limit, pull.after], ['g', 3, 1, undefined]);
  ws.push({ t: 'page', rid: pull.rid, gid: 'g', last_mid: 2, more: true, msgs: [{ mid: 2, from: 'u1', ts: 2, body: 'two, from my phone', ver: 2 }] });
  assert.deepEqual(shown(client, 'g')[1], [2, 'two, from my phone', 2, false]);
  assert.equal(client.versionOf('g', 2), 2);
  client.edit('g', 2, 'two?').catch(() => {});
  assert.equal(ws.take('edit')[0].ver, 3);

  // Recall: no ver, no body.
  const r = client.recall('g', 1);
  const [fr] = ws.take('recall');
  assert.deepEqual({ ...fr, rid: 0 }, { t: 'recall', gid: 'g', mid: 1, rid: 0 });
  ws.push({ t: 'recalled', rid: fr.rid, gid: 'g', mid: 1, ver: 3, ts: 60, from: 'u1' });
  assert.deepEqual(await r, { gid: 'g', mid: 1, ver: 3, ts: 60, from: 'u1', recalled: true });
  assert.deepEqual(shown(client, 'g')[0], [1, '', 3, true]);

  // Refused: the promise is rejected with the code; no notice besides.
  const bad = client.edit('g', 1, 'back?');
  const [fb] = ws.take('edit');
  assert.equal(fb.ver, 4);
  ws.push({ t: 'err', rid: fb.rid, gid: 'g', code: 'bad_field', msg: 'mid: the message was recalled' });
  await assert.rejects(bad, (x) => x.code === 'bad_field' && /recalled/.test(x.message));
  ws.take('pull');
  const other = client.recall('g', 99);
  ws.push({ t: 'err', rid: ws.take('recall')[0].rid, gid: 'g', code: 'unauthorized', msg: 'not the sender' });
  await assert.rejects(other, (x) => x.code === 'unauthorized');
  await assert.rejects(client.edit('g', 1, 'x'.repeat(1001)), (x) => x.code === 'too_large');
  await assert.rejects(client.edit('g', 0, 'x'), (x) => x.code === 'bad_field');
  assert.deepEqual(notices, []);
  assert.deepEqual(events.map((x) => [x.mid, x.ver, x.recalled]), [
    [1, 1, false],
    [1, 2, false],
    [1, 3, true],
  ]);
  client.stop();
});

test('an edit survives the connection: sent again with the same ver after a reconnect, retried when the gateway is busy, rejected on sign-out', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 1, ack: 0, unread: 1 }]);
  client.open('g');
  const [e] = ws.take('enter');
  ws.push({ t: 'page', rid: e.rid, gid: 'g', last_mid: 1, more: false, msgs: [{ mid: 1, from: 'u1', ts: 1, body: 'one' }] });
  const p = client.edit('g', 1, 'one, again');
  const [f1] = ws.take('edit');
  ws.drop(1006); // before the reply: stored or not, the same frame again is stored once
  await sleep(client.retryAt - Date.now() + 50);
  await sleep(0);
  const ws2 = FakeSocket.all[1];
  ws2.take('hello');
  ws2.push(welcome([{ gid: 'g', last_mid: 1, ack: 1, unread: 0 }]));
  const [f2] = ws2.take('edit');
  assert.deepEqual({ ...f2, rid: 0 }, { ...f1, rid: 0 }, 'the same edit, the same ver');
  ws2.push({ t: 'err', rid: f2.rid, gid: 'g', code: 'unavailable', msg: 'the store cannot take writes now' });
  assert.deepEqual(ws2.take('edit'), [], 'not at once');
  await sleep(1100); // its second try: 1 s later
  const [f3] = ws2.take('edit');
  assert.equal(f3.ver, 1);
  ws2.push({ t: 'edited', rid: f3.rid, gid: 'g', mid: 1, ver: 1, ts: 70, from: 'u1', body: 'one, again' });
  assert.equal((await p).ver, 1);
  // Offline when asked: it waits; signing out rejects it.
  ws2.drop(1006);
  const q = client.recall('g', 1);
  client.stop();
  await assert.rejects(q, (x) => x.code === 'offline');
  await assert.rejects(client.edit('g', 1, 'x'), (x) => x.code === 'offline');
});

const page = (rid, gid, mids, extra = {}) => ({ t: 'page', rid, gid, more: false, msgs: mids.map((mid) => ({ mid, from: 'u2', ts: mid, body: `m${mid}` })), ...extra });

test('retention: an ack below the horizon; the first page starts at it, is acked, and nothing older is asked for', async () => {
  const { client, ws } = await online([{ gid: 'g', first_mid: 16, last_mid: 20, ack: 3, unread: 5 }]);
  assert.deepEqual(client.groupList().map((g) => [g.gid, g.firstMid, g.unread]), [['g', 16, 5]], 'unread never counts deleted messages');
  client.open('g');
  const [e] = ws.take('enter');
  ws.push(page(e.rid, 'g', [16, 17, 18, 19, 20], { first_mid: 16, gone_before: 16, last_mid: 20 }));
  assert.deepEqual(client.viewEntries('g').map((x) => x.mid), [16, 17, 18, 19, 20]);
  const meta = client.viewMeta('g');
  assert.deepEqual([meta.w, meta.firstMid, meta.firstUnread, meta.hasOlder, meta.olderGone], [20, 16, 16, false, true]);
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 20 }], "the page's last mid is acked at once");
  assert.equal(client.loadOlder(), false, 'nothing older to pull');
  assert.deepEqual([ws.take('pull'), client.groupList()[0].unread], [[], 0]);
  client.stop();
});

test('retention: a watermark below a horizon that moved while away steps over the deleted mids (no pull loop)', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 5, ack: 5, unread: 0 }]);
  enter(client, ws, 'g', 5, []);
  ws.take('pull');
  // The group went on to 20 and kept only its last 5: the client pulls after its
  // watermark and gets a page that starts at the horizon.
  ws.push({ t: 'notify', gid: 'g', last_mid: 20 });
  const [p1] = ws.take('pull');
  assert.equal(p1.after, 5);
  ws.push(page(p1.rid, 'g', [16, 17, 18, 19, 20], { first_mid: 16, gone_before: 16, last_mid: 20 }));
  assert.equal(client.viewMeta('g').w, 20, 'not waiting for 6..15');
  assert.deepEqual(ws.take('pull'), [], 'and not pulling them again');
  assert.deepEqual(ws.take('ack').map((a) => a.acks), [{ g: 20 }]);
  const meta = client.viewMeta('g');
  assert.deepEqual([meta.hasOlder, meta.olderGone, client.groupList()[0].firstMid], [false, true, 16]);
  // A live message after it counts on as usual.
  ws.push(msg('g', 21));
  assert.equal(client.viewMeta('g').w, 21);
  client.stop();
});

test('retention: older history stops at the horizon, said by gone_before; a group without one says its start', async () => {
  const { client, ws } = await online([
    { gid: 'g', first_mid: 10, last_mid: 20, ack: 17, unread: 3 },
    { gid: 'h', last_mid: 4, ack: 2, unread: 2 }, // first_mid absent: an older gateway
  ]);
  client.open('g');
  const [e] = ws.take('enter');
  ws.push(page(e.rid, 'g', [18, 19, 20], { first_mid: 10, last_mid: 20 }));
  assert.deepEqual([client.viewMeta('g').hasOlder, client.viewMeta('g').olderGone], [true, false]);
  assert.equal(client.loadOlder(), true);
  const [b] = ws.take('pull');
  assert.equal(b.before, 18);
  // The horizon moved on meanwhile (14): the page stops there and says so.
  ws.push(page(b.rid, 'g', [14, 15, 16, 17], { first_mid: 14, gone_before: 14, last_mid: 20 }));
  assert.deepEqual(client.viewEntries('g').map((x) => x.mid), [14, 15, 16, 17, 18, 19, 20]);
  const meta = client.viewMeta('g');
  assert.deepEqual([meta.hasOlder, meta.olderGone, meta.firstMid, meta.loadingOlder], [false, true, 14, false]);
  assert.equal(client.loadOlder(), false);

  client.open('h');
  const [eh] = ws.take('enter');
  ws.push(page(eh.rid, 'h', [3, 4], { last_mid: 4 }));
  assert.equal(client.loadOlder(), true);
  const [bh] = ws.take('pull');
  ws.push(page(bh.rid, 'h', [1, 2], { last_mid: 4 }));
  const mh = client.viewMeta('h');
  assert.deepEqual([mh.hasOlder, mh.olderGone, mh.firstMid], [false, false, 1], 'the start of the group: nothing was deleted');
  client.stop();
});

test('a partial welcome keeps the groups it leaves out; the whole list pushed later sets them', async () => {
  const { client, ws } = await online([
    { gid: 'a', last_mid: 2, ack: 2, unread: 0 },
    { gid: 'b', last_mid: 5, ack: 3, unread: 2 },
  ]);
  assert.equal(client.groupsPartial, false);
  ws.drop(1006);
  await sleep(client.retryAt - Date.now() + 50);
  await sleep(0);
  const ws2 = FakeSocket.all.at(-1);
  assert.equal(ws2.take('hello').length, 1);
  // A database of the gateway's is away: b's shard. b is not dropped.
  ws2.push(welcome([{ gid: 'a', last_mid: 3, ack: 2, unread: 1 }], { partial: true }));
  assert.equal(client.groupsPartial, true);
  assert.deepEqual(client.groupList().map((g) => [g.gid, g.unread]), [['a', 1], ['b', 2]]);
  let events = 0;
  client.addEventListener('groups', () => events++);
  // The whole list, pushed once the gateway read it (no rid).
  ws2.push({ t: 'groups', groups: [
    { gid: 'a', last_mid: 3, ack: 2, unread: 1 },
    { gid: 'b', last_mid: 7, ack: 3, unread: 4 },
  ] });
  await sleep(0);
  assert.equal(client.groupsPartial, false);
  assert.deepEqual(client.groupList().map((g) => [g.gid, g.unread]), [['a', 1], ['b', 4]]);
  assert.ok(events >= 1, 'a groups event');
  // A whole list without b: b is gone (left elsewhere), as ever.
  ws2.push({ t: 'groups', groups: [{ gid: 'a', last_mid: 3, ack: 3, unread: 0 }] });
  assert.deepEqual(client.groupList().map((g) => g.gid), ['a']);
  client.stop();
});
