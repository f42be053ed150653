// The change cursor and reactions against the real gateway: build/gw (127.0.0.1, a free
// port, a fresh data folder, its API on, --retain-changes 30), tokens from
// build/tools/gw_token, node's `ws` as the WebSocket. A client that holds a conversation
// and goes offline while others edit, recall, react and one of them is erased comes back
// holding exactly what the gateway has (read through the API, message by message), and
// its catch-up carried the messages changed, not the history; reactions reach online
// members at once; a client whose cursor is older than the change log reaches pages its
// window again and converges too.
// GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';
import { until, startGateway, sleep, group, joinAll } from './fixture.js';

const KEY = 'js-changes-api-key-0123456789';
const KEEP_CHANGES = 30;
const keyDir = mkdtempSync(join(tmpdir(), 'gw-js-key-'));
const keyFile = join(keyDir, 'keys');
writeFileSync(keyFile, `${KEY}\n`);
const gw = startGateway('gw-js-changes-', ['--api-key-file', keyFile, '--retain-changes', String(KEEP_CHANGES)]);
const clients = new Set();
after(() => {
  for (const c of clients) c.stop();
  gw.stop();
  rmSync(keyDir, { recursive: true, force: true });
});

async function api(method, path) {
  const http = (await gw.url()).replace(/^ws/, 'http').replace(/\/ws$/, '');
  const res = await fetch(`${http}/api/v1${path}`, { method, headers: { Authorization: `Bearer ${KEY}` } });
  const text = await res.text();
  assert.equal(res.status, 200, `${method} ${path}: ${text}`);
  return JSON.parse(text);
}

/** A client for uid whose connection the test can cut and keep cut: offline() closes it
 * and holds every reconnect at getToken until online(). */
async function signIn(uid) {
  let gate = null;
  let open = null;
  const c = new GwClient({
    url: await gw.url(),
    getToken: async () => {
      if (gate) await gate;
      return gw.token(uid);
    },
    WebSocketImpl: WebSocket,
  });
  c.offline = async () => {
    gate = new Promise((r) => (open = r));
    c.ws.close();
    await until(`${uid} offline`, () => c.state !== 'online');
  };
  c.online = async () => {
    gate = null;
    open();
    c.reconnectNow();
    await until(`${uid} online again`, () => c.state === 'online', 20000);
  };
  clients.add(c);
  c.start();
  await until(`${uid} online`, () => c.state === 'online');
  return c;
}

const stored = (c, gid) => c.viewEntries(gid).filter((e) => e.mid);

/** What a view shows, message by message: [mid, from, text or null (deleted), ver,
 * {key: count}]. */
const viewState = (c, gid) => stored(c, gid).map((e) => [e.mid, e.from, e.recalled ? null : e.text, e.ver, Object.fromEntries(e.reactions.map((r) => [r.key, r.count]))]);

/** The same of the gateway's store, through the API. */
async function serverState(gid, lo, hi) {
  const page = await api('GET', `/groups/${gid}/messages?after=${lo - 1}&limit=${hi - lo + 1}`);
  return page.messages.map((m) => [m.mid, m.from, m.recalled ? null : m.body, m.ver || 0, m.reactions || {}]);
}

async function sendAll(c, gid, texts) {
  for (const t of texts) c.send(gid, t);
  await until(`${texts.length} stored`, () => c.pending.size === 0);
}

async function current(c, gid) {
  await until(`${gid} current`, () => c.state === 'online' && !c.viewMeta(gid).catchingUp, 20000);
}

test('offline while others edit, recall, react and one is erased: back, the view is the gateway\'s, caught up in O(changes)', async () => {
  const alice = await signIn('alice');
  const bob = await signIn('bob');
  const carol = await signIn('carol');
  await joinAll('conv', alice, bob, carol);
  for (const c of [alice, bob, carol]) c.open('conv');
  await sendAll(alice, 'conv', ['a1', 'a2', 'a3']);
  await sendAll(bob, 'conv', ['b4', 'b5', 'b6', 'b7']);
  await sendAll(carol, 'conv', ['c8', 'c9']);
  await sendAll(alice, 'conv', ['a10', 'a11', 'a12']);
  await until('alice holds 12', () => stored(alice, 'conv').length === 12);
  await until('bob holds 12', () => stored(bob, 'conv').length === 12);

  // Online: a reaction reaches the others at once, with the reader's own keys.
  const seen = [];
  bob.addEventListener('reacted', (e) => seen.push([e.detail.uid, e.detail.key, e.detail.count]));
  const r = await alice.react('conv', 4, '👍');
  assert.deepEqual([r.count, r.duplicate, r.uid], [1, false, 'alice']);
  assert.equal((await alice.react('conv', 4, '👍')).duplicate, true, 'set again: nothing changes');
  await until('bob sees the reaction', () => bob.reactionsOf('conv', 4).length === 1);
  assert.deepEqual(bob.reactionsOf('conv', 4), [{ key: '👍', count: 1, mine: false }]);
  assert.deepEqual(alice.reactionsOf('conv', 4), [{ key: '👍', count: 1, mine: true }]);
  assert.deepEqual(seen, [['alice', '👍', 1]]);
  await assert.rejects(alice.react('conv', 99, '👍'), (e) => e.code === 'bad_field');

  // alice goes offline holding the conversation.
  const cursorBefore = alice.changeCursor('conv');
  assert.ok(cursorBefore >= 1);
  await alice.offline();
  await bob.edit('conv', 5, 'b5, edited');
  await bob.recall('conv', 6);
  await bob.react('conv', 1, '❤️');
  await bob.react('conv', 4, '👍');
  await carol.react('conv', 4, '🎉');
  await carol.react('conv', 2, '👍');
  await api('DELETE', '/users/carol'); // her messages 8, 9 tombstones; her reactions gone
  // Changed while alice was away: 5, 6, 1, 4, 2, 8, 9 (4 and 2 folded).
  const changedMids = 7;
  await alice.online();
  await current(alice, 'conv');
  assert.deepEqual(viewState(alice, 'conv'), await serverState('conv', 1, 12));
  // bob, online all along (the erasure came to him as `changed`), shows the same.
  await current(bob, 'conv');
  assert.deepEqual(viewState(bob, 'conv'), viewState(alice, 'conv'));
  const shown = Object.fromEntries(viewState(alice, 'conv').map((m) => [m[0], m]));
  assert.deepEqual(shown[5], [5, 'bob', 'b5, edited', 1, {}]);
  assert.deepEqual(shown[6], [6, 'bob', null, 1, {}]);
  assert.deepEqual(shown[8].slice(2), [null, 1, {}], 'erased: a tombstone');
  assert.deepEqual(shown[4][4], { '👍': 2 }, "carol's 🎉 went with her");
  assert.deepEqual(shown[2][4], {});
  assert.deepEqual(shown[1][4], { '❤️': 1 });
  assert.deepEqual(alice.reactionsOf('conv', 4), [{ key: '👍', count: 2, mine: true }]);
  // The catch-up: the messages changed, each once, not the 12 held.
  const since = alice.changeLog.filter((x) => x.after >= cursorBefore && x.gid === 'conv');
  const entries = since.reduce((s, x) => s + x.entries, 0);
  assert.ok(entries >= changedMids - 2 && entries <= changedMids, `catch-up carried ${entries} entries for ${changedMids} messages changed (${JSON.stringify(since)})`);
  assert.equal(since.filter((x) => x.gone).length, 0);
  assert.equal(alice.changeCursor('conv'), (await api('GET', '/groups/conv/changes?after=0&limit=1')).last_cseq);
});

test('a cursor older than the change log (--retain-changes): the window held is paged again, and converges', async () => {
  const dave = await signIn('dave');
  const erin = await signIn('erin');
  await joinAll('long', dave, erin);
  dave.open('long');
  erin.open('long');
  await sendAll(erin, 'long', ['e1', 'e2', 'e3', 'e4']);
  await until('dave holds 4', () => stored(dave, 'long').length === 4);
  await dave.offline();
  // More changes than the log keeps: each reaction set and cleared is one.
  for (let i = 0; i < KEEP_CHANGES + 6; i++) await erin.react('long', 1 + (i % 4), '🔥', i % 8 < 4);
  await erin.edit('long', 2, 'e2, edited');
  // The gateway trims its log in the background: until it no longer serves after 0.
  let trimmed = false;
  for (let i = 0; i < 100 && !trimmed; i++) {
    const c = await api('GET', '/groups/long/changes?after=0&limit=1');
    trimmed = (c.changes_gone_before || 0) > 0;
    if (!trimmed) await sleep(100);
  }
  assert.ok(trimmed, 'the change log was trimmed');
  await dave.online();
  await current(dave, 'long');
  assert.ok(dave.changeLog.some((x) => x.gid === 'long' && x.gone), 'changes_gone_before was said');
  assert.deepEqual(viewState(dave, 'long'), await serverState('long', 1, 4));
  assert.deepEqual(viewState(dave, 'long'), viewState(erin, 'long'));
  assert.equal(stored(dave, 'long')[1].text, 'e2, edited');
});

test('random edits, recalls and reactions by three members, one of them going offline at random: every view ends as the gateway\'s', async () => {
  // A seeded generator, so that a failure can be replayed (the seed is in the message).
  let seed = Number(process.env.GW_SEED || Date.now() % 100000);
  const first = seed;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const people = [await signIn('fay'), await signIn('gus'), await signIn('hal')];
  await joinAll('mix', ...people);
  for (const c of people) c.open('mix');
  for (const [i, c] of people.entries()) await sendAll(c, 'mix', [`x${i}a`, `x${i}b`, `x${i}c`, `x${i}d`]);
  await until('all hold 12', () => people.every((c) => stored(c, 'mix').length === 12));
  const owner = new Map(stored(people[0], 'mix').map((e) => [e.mid, e.from]));
  const keys = ['👍', '❤️', '🎉'];
  const offline = new Set();
  for (let step = 0; step < 60; step++) {
    const who = rand(3);
    const c = people[who];
    if (rand(8) === 0) {
      // One goes offline, or comes back.
      if (offline.has(c)) {
        offline.delete(c);
        await c.online();
      } else if (offline.size < 2) {
        offline.add(c);
        await c.offline();
      }
      continue;
    }
    if (offline.has(c)) continue; // its requests would wait for the reconnect
    const mid = 1 + rand(12);
    const mine = owner.get(mid) === ['fay', 'gus', 'hal'][who];
    const op = rand(10);
    const ignore = (e) => {
      if (!['bad_field', 'conflict'].includes(e.code)) throw e; // a recalled message, or raced
    };
    if (mine && op === 0) await c.recall('mix', mid).catch(ignore);
    else if (mine && op < 3) await c.edit('mix', mid, `edit ${step}`).catch(ignore);
    else await c.react('mix', mid, keys[rand(3)], rand(3) > 0).catch(ignore);
  }
  for (const c of offline) await c.online();
  const server = await serverState('mix', 1, 12);
  for (const [i, c] of people.entries()) {
    await current(c, 'mix');
    await until(`${['fay', 'gus', 'hal'][i]} converged (seed ${first})`, () => JSON.stringify(viewState(c, 'mix')) === JSON.stringify(server), 10000).catch((e) => {
      e.message += `\n${JSON.stringify(viewState(c, 'mix'))}\n${JSON.stringify(server)}`;
      throw e;
    });
  }
});
