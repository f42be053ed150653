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
