// The package against the real gateway: build/gw on 127.0.0.1 (a free port, a fresh data
// folder), tokens from build/tools/gw_token, and node's `ws` as the WebSocket. Two users:
// a message sent while one is away is pulled, exactly once, when that one comes back and
// opens the group, and its ack is stored (the next sign-in shows nothing unread); reads,
// receipts, typing and presence between them; edits and recalls. (The README's example
// app runs in test/package.test.js, from the package installed as the README says.)
// GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';
import { build, sleep, until, startGateway, group, joinAll } from './fixture.js';


const gw = startGateway('gw-js-');
const { dir, data } = gw;
after(() => {
  gw.stop();
});

const url = () => gw.url();

const token = (uid) => gw.token(uid);

async function signIn(uid) {
  const c = new GwClient({ url: await url(), getToken: async () => token(uid), WebSocketImpl: WebSocket });
  c.start();
  await until(`${uid} online`, () => c.state === 'online');
  return c;
}

const bodies = (c, gid) => c.viewEntries(gid).filter((e) => e.mid).map((e) => e.text);

test('a message sent while a member is away is pulled once when it opens the group, and acked', async () => {
  const alice = await signIn('alice');
  let bob = await signIn('bob');
  await joinAll('room', alice, bob);
  bob.stop(); // bob goes away

  alice.open('room');
  for (const text of ['one', 'two', 'three']) alice.send('room', text);
  await until('alice sent three', () => alice.pending.size === 0 && bodies(alice, 'room').length === 3);

  bob = await signIn('bob');
  assert.equal(group(bob, 'room').unread, 3, 'the welcome counts what bob missed');
  bob.open('room'); // enter: a page after his stored ack
  await until('bob holds three', () => bodies(bob, 'room').length === 3);
  assert.deepEqual(bodies(bob, 'room'), ['one', 'two', 'three']);
  alice.send('room', 'four'); // live, while bob has the group open
  await until('bob holds four', () => bodies(bob, 'room').length === 4);
  assert.deepEqual(bodies(bob, 'room'), ['one', 'two', 'three', 'four'], 'each once, in order');
  bob.close(); // leaving the view acks it
  await sleep(500); // the gateway persists acks every 200 ms
  bob.stop();

  const again = await signIn('bob');
  assert.equal(group(again, 'room').unread, 0, 'the ack was stored');
  again.stop();
  alice.stop();
});

test('reads, receipts, typing and presence between two users', async () => {
  const alice = await signIn('alice');
  const bob = await signIn('bob');
  await joinAll('peers', alice, bob);
  // Neither has the group open: their acks stay 0, so what counts below is bob's read.
  for (const text of ['one', 'two', 'three']) alice.send('peers', text);
  await until('alice sent three', () => alice.pending.size === 0 && group(alice, 'peers').lastMid === 3);
  await until('bob counts three', () => group(bob, 'peers').unread === 3);

  const presence = [];
  alice.addEventListener('presence', (e) => presence.push(e.detail));
  const p = await alice.presence('peers', { subscribe: true });
  assert.deepEqual([p.online, p.of], [2, 2]);
  assert.deepEqual(p.members.map((m) => [m.uid, m.online]).sort(), [['alice', true], ['bob', true]]);
  assert.ok(p.members.every((m) => m.lastSeen > Date.now() - 60000), 'online members were seen now');

  alice.watch('peers', [2, 3]);
  await until('the receipts of the watched messages', () => alice.receiptsOf('peers', 2) && alice.receiptsOf('peers', 3));
  assert.deepEqual(alice.receiptsOf('peers', 2), { gid: 'peers', mid: 2, delivered: 0, read: 0, of: 2, readers: [] });

  bob.markRead('peers', 2); // batched: goes out after ack_delay_ms
  assert.equal(group(bob, 'peers').unread, 1, 'counted from the read at once');
  await until('bob sent the read', () => bob.readLog.length === 1);
  assert.deepEqual(bob.readLog[0].reads, { peers: 2 });
  // The watch pushes bob's move (at most one push a second), and the client asks again.
  await until("alice's watched receipts to show bob's read", () => alice.receiptsOf('peers', 2).read === 1);
  assert.deepEqual(alice.receiptsOf('peers', 2), { gid: 'peers', mid: 2, delivered: 1, read: 1, of: 2, readers: ['bob'] });
  assert.equal(alice.receiptsOf('peers', 3).read, 0, 'bob read up to 2 only');
  const r1 = await alice.receipts('peers', 1);
  assert.deepEqual([r1.delivered, r1.read, r1.of, r1.readers], [1, 1, 2, ['bob']], 'a read without an ack: read, and so delivered');
  await assert.rejects(alice.receipts('elsewhere', 1), (e) => e.code === 'not_member');

  // A second session of bob: its welcome counts unread from the read (3 - 2).
  const bob2 = await signIn('bob');
  assert.deepEqual([group(bob2, 'peers').read, group(bob2, 'peers').unread], [2, 1]);

  // Typing reaches the other user, once per 2 s, and is forgotten after its ttl.
  const typing = [];
  alice.addEventListener('typing', (e) => typing.push(e.detail.uids));
  assert.equal(bob.typing('peers'), true);
  assert.equal(bob.typing('peers'), false, 'within 2 s: not sent again');
  await until('alice sees bob typing', () => alice.typingIn('peers').includes('bob'));
  assert.deepEqual(bob2.typingIn('peers'), [], "not to the typist's own sessions");
  await until('bob typing forgotten after the ttl', () => alice.typingIn('peers').length === 0, 8000);
  assert.deepEqual(typing, [['bob'], []]);

  // Both bob sessions go: alice's subscription tells, within a few seconds.
  bob.stop();
  bob2.stop();
  await until('bob offline for alice', () => alice.presenceOf('peers').online === 1);
  const bobNow = alice.presenceOf('peers').members.find((m) => m.uid === 'bob');
  assert.equal(bobNow.online, false);
  assert.ok(bobNow.lastSeen > 0);
  assert.ok(presence.length >= 2, 'the reply, then the change');
  alice.stop();
});

test('edits and recalls: the other member sees both, live and after signing in again; a conflict pulls the message again', async () => {
  const alice = await signIn('alice');
  let bob = await signIn('bob');
  await joinAll('versions', alice, bob);
  alice.open('versions');
  bob.open('versions');
  for (const text of ['first', 'second', 'third']) alice.send('versions', text);
  await until('bob holds three', () => bodies(bob, 'versions').length === 3);
  const entry = (c, mid) => c.viewEntries('versions').find((e) => e.mid === mid);
  const seen = [];
  for (const t of ['edited', 'recalled']) bob.addEventListener(t, (e) => seen.push([t, e.detail.mid, e.detail.ver, e.detail.from]));

  const e1 = await alice.edit('versions', 1, 'first, edited');
  assert.deepEqual([e1.gid, e1.mid, e1.ver, e1.from, e1.recalled, e1.body], ['versions', 1, 1, 'alice', false, 'first, edited']);
  assert.ok(e1.ts >= entry(alice, 1).ts, 'the version is made after the message');
  assert.deepEqual([entry(alice, 1).text, entry(alice, 1).ver], ['first, edited', 1], "the sender's copy");
  await until('bob sees the edit', () => entry(bob, 1).text === 'first, edited');
  const e2 = await alice.edit('versions', 1, 'first, edited twice');
  assert.equal(e2.ver, 2);
  const r = await alice.recall('versions', 2);
  assert.deepEqual([r.mid, r.ver, r.recalled, r.body], [2, 1, true, undefined]);
  await until('bob sees the recall', () => entry(bob, 2).recalled);
  assert.deepEqual(
    bob.viewEntries('versions').map((e) => [e.mid, e.text, e.ver, e.recalled, e.from]),
    [
      [1, 'first, edited twice', 2, false, 'alice'],
      [2, '', 1, true, 'alice'],
      [3, 'third', 0, false, 'alice'],
    ],
  );
  assert.deepEqual(seen, [
    ['edited', 1, 1, 'alice'],
    ['edited', 1, 2, 'alice'],
    ['recalled', 2, 1, 'alice'],
  ]);

  // Refused: another's message, a recalled one, one that does not exist, a group the
  // user is not in.
  await assert.rejects(bob.edit('versions', 1, 'not mine'), (e) => e.code === 'unauthorized');
  await assert.rejects(bob.recall('versions', 3), (e) => e.code === 'unauthorized');
  await assert.rejects(alice.edit('versions', 2, 'back again'), (e) => e.code === 'bad_field');
  await assert.rejects(alice.edit('versions', 99, 'nothing there'), (e) => e.code === 'bad_field');
  await assert.rejects(alice.recall('elsewhere', 1), (e) => e.code === 'not_member');
  assert.equal(entry(bob, 1).text, 'first, edited twice', 'nothing changed');

  // Another device of alice that never saw the edits (no view, signed in after them)
  // makes version 1 again: conflict; the message is pulled again, and the next edit goes
  // on top of version 2. Alice's first session sees it too (the sender's other devices).
  const phone = await signIn('alice');
  await assert.rejects(phone.edit('versions', 1, 'from my phone'), (e) => e.code === 'conflict');
  await until('the phone pulled the message again', () => phone.versionOf('versions', 1) === 2);
  const e3 = await phone.edit('versions', 1, 'from my phone');
  assert.equal(e3.ver, 3);
  await until('alice and bob see version 3', () => entry(alice, 1).ver === 3 && entry(bob, 1).ver === 3);
  assert.deepEqual([entry(alice, 1).text, entry(bob, 1).text], ['from my phone', 'from my phone']);
  // The same version with the same body again (what a resend after a lost reply sends)
  // is answered again, with the same ts: stored once.
  const again = await phone.change({ t: 'edit', gid: 'versions', mid: 1, body: 'from my phone', ver: 3 });
  assert.deepEqual([again.ver, again.ts], [3, e3.ts]);
  await sleep(300);
  assert.equal(bob.counters.in.edited, 3, 'and not pushed again');
  phone.stop();

  // Bob signs in again: the pages carry the latest versions.
  bob.stop();
  bob = await signIn('bob');
  bob.open('versions'); // nothing unread: the view starts empty, at the end
  await until('bob entered the group', () => bob.viewMeta('versions').w === 3);
  assert.equal(bob.loadOlder(), true);
  await until('bob pulled the group again', () => bob.viewEntries('versions').length === 3);
  assert.deepEqual(
    bob.viewEntries('versions').map((e) => [e.mid, e.text, e.ver, e.recalled]),
    [
      [1, 'from my phone', 3, false],
      [2, '', 1, true],
      [3, 'third', 0, false],
    ],
  );
  const held = bob.groups.get('versions').view.held.get(2);
  assert.deepEqual(held, { mid: 2, from: 'alice', ts: held.ts, ver: 1, recalled: true, cseq: held.cseq }, 'a tombstone: no body');
  assert.ok(held.cseq > 0, 'held at the cseq of its recall');
  bob.stop();
  alice.stop();
});
