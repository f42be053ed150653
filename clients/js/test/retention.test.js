// Retention against the real gateway: build/gw started with --retain-messages 5 (a
// fresh data folder, 127.0.0.1, a free port), tokens from build/tools/gw_token, node's
// `ws` as the WebSocket. A member whose ack is below the group's horizon opens it: the
// first page starts at the horizon, its watermark does not wait for the deleted mids,
// its ack is stored, older history stops there and the view says older messages are
// gone (not that the group starts there). A view kept while its owner was away steps
// over the messages deleted meanwhile.
// GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';
import { build, sleep, until, startGateway, group, joinAll } from './fixture.js';


const KEEP = 5;
const gw = startGateway('gw-js-retain-', ['--retain-messages', String(KEEP)]);
const { dir, data } = gw;
const clients = new Set();
after(() => {
  for (const c of clients) c.stop();
  gw.stop();
});

const url = () => gw.url();

const token = (uid) => gw.token(uid);

async function signIn(uid) {
  const c = new GwClient({ url: await url(), getToken: async () => token(uid), WebSocketImpl: WebSocket });
  clients.add(c);
  c.start();
  await until(`${uid} online`, () => c.state === 'online');
  return c;
}

const mids = (c, gid) => c.viewEntries(gid).filter((e) => e.mid).map((e) => e.mid);
const range = (lo, hi) => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);

/** Send texts to gid from c (its view open) and wait until all are stored. */
async function sendAll(c, gid, texts) {
  for (const text of texts) c.send(gid, text);
  await until(`${texts.length} messages stored`, () => c.pending.size === 0);
}

/** Poll the group list (a retention pass runs about once a second) until the horizon
 * of gid is at least firstMid; bounded. */
async function horizonAt(c, gid, firstMid, ms = 10000) {
  const end = Date.now() + ms;
  while (!(group(c, gid) && group(c, gid).firstMid >= firstMid)) {
    if (Date.now() > end) throw new Error(`timed out waiting for the horizon of ${gid} to reach ${firstMid} (it is ${group(c, gid) && group(c, gid).firstMid})`);
    c.refreshGroups();
    await sleep(200);
  }
}

test('an ack below the horizon: the first page starts at it, is acked, and older history says it is gone', async () => {
  const alice = await signIn('alice');
  let bob = await signIn('bob');
  await joinAll('kept', alice, bob);
  assert.equal(group(bob, 'kept').firstMid, 1, 'nothing deleted yet');
  bob.stop(); // bob goes away with his ack at 0

  alice.open('kept');
  await sendAll(alice, 'kept', range(1, 20).map((i) => `message ${i}`));
  assert.equal(group(alice, 'kept').lastMid, 20);
  await horizonAt(alice, 'kept', 20 - KEEP + 1);
  assert.equal(group(alice, 'kept').firstMid, 16, 'the last 5 are kept');
  // Alice held all 20 before they were deleted: the pass pushed `changed`, and the
  // `changes` reply's horizon drops what the group no longer keeps (the client rule:
  // what is held converges to the group's).
  await until('alice holds what is kept', () => mids(alice, 'kept').length === KEEP && !alice.viewMeta('kept').catchingUp);
  assert.deepEqual(mids(alice, 'kept'), range(16, 20));
  assert.equal(alice.viewMeta('kept').olderGone, true, 'alice sees that older messages are gone');

  bob = await signIn('bob');
  assert.deepEqual([group(bob, 'kept').firstMid, group(bob, 'kept').unread], [16, 5], 'the welcome: the horizon, and only what is kept counts');
  bob.open('kept'); // enter after ack 0: the page starts at the horizon
  await until('bob entered', () => bob.viewMeta('kept').w === 20);
  assert.deepEqual(mids(bob, 'kept'), range(16, 20), 'exactly the kept messages, dense');
  assert.deepEqual(bob.viewEntries('kept').map((e) => e.text), range(16, 20).map((i) => `message ${i}`));
  const meta = bob.viewMeta('kept');
  assert.deepEqual([meta.firstMid, meta.hasOlder, meta.olderGone, meta.firstUnread, meta.catchingUp], [16, false, true, 16, false]);
  assert.equal(bob.loadOlder(), false, 'nothing older to pull');
  await until("bob acked the page's last mid", () => bob.ackLog.some((a) => a.acks.kept === 20));
  assert.equal(group(bob, 'kept').unread, 0);
  assert.equal(bob.counters.out.pull || 0, 0, 'no pull after the first page (nothing waited for below the horizon)');
  bob.close();
  await sleep(500); // the gateway persists acks every 200 ms
  bob.stop();

  const again = await signIn('bob');
  assert.deepEqual([group(again, 'kept').unread, again.groups.get('kept').ack], [0, 20], 'the ack was stored');
  again.stop();
  alice.stop();
});

test('a view kept while its owner was away: its watermark steps over what was deleted meanwhile', async () => {
  const alice = await signIn('alice');
  const carol = await signIn('carol');
  await joinAll('away', alice, carol);
  alice.open('away');
  carol.open('away');
  await sendAll(alice, 'away', ['one', 'two', 'three']);
  await until('carol holds three', () => carol.viewMeta('away').w === 3);
  carol.close();
  carol.stop(); // the same client comes back later: its view of the group is kept

  await sendAll(alice, 'away', range(4, 20).map((i) => `message ${i}`));
  await horizonAt(alice, 'away', 16);

  carol.start();
  await until('carol online again', () => carol.state === 'online');
  carol.open('away');
  await until('carol caught up', () => carol.viewMeta('away').w === 20 && !carol.viewMeta('away').catchingUp);
  assert.deepEqual(mids(carol, 'away'), range(16, 20), 'what she held from before the gap is dropped: no silent hole');
  const meta = carol.viewMeta('away');
  assert.deepEqual([meta.firstMid, meta.hasOlder, meta.olderGone], [16, false, true]);
  await until("carol acked what she holds", () => carol.ackLog.some((a) => a.acks.away === 20));
  const pulls = carol.counters.out.pull || 0;
  await sleep(300);
  assert.equal(carol.counters.out.pull || 0, pulls, 'no pull loop for the deleted mids');
  carol.stop();
  alice.stop();
});
