// The change cursor (src/cursor.js) and reactions (src/reactions.js) against a scripted
// fake WebSocket: the client rule of docs/PROTOCOL.md (Changes) checked frame by frame.
// The same rules against the real gateway: changes-gateway.test.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeSocket, startOnline } from './fake-socket.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const welcome = (groups) => ({ t: 'welcome', uid: 'u1', sid: 's1', ts: 1, ack_every: 50, ack_delay_ms: 1000, max_body: 1000, groups });
const entry = (mid, extra = {}) => ({ mid, from: 'u2', ts: 1000 + mid, body: `m${mid}`, ...extra });

async function online(groups) {
  const { client, ws } = await startOnline(welcome(groups));
  return { client, ws };
}

/** Open gid, answer its enter with msgs and the group's last_cseq. */
function enter(client, ws, gid, msgs, lastCseq) {
  client.open(gid);
  const [e] = ws.take('enter');
  ws.push({ t: 'page', rid: e.rid, gid, first_mid: 1, last_mid: msgs.length ? msgs.at(-1).mid : 0, last_cseq: lastCseq, more: false, msgs });
  ws.take('ack');
}

/** What the view shows: [mid, text, ver, recalled, {key: count}, mine]. */
const shown = (client, gid) =>
  client.viewEntries(gid).map((e) => [e.mid, e.text, e.ver, e.recalled, Object.fromEntries(e.reactions.map((r) => [r.key, r.count])), e.reactions.filter((r) => r.mine).map((r) => r.key)]);

const reacted = (gid, mid, uid, key, on, count, cseq, extra = {}) => ({ t: 'reacted', gid, mid, uid, key, on, count, cseq, ...extra });

test('the first page sets the cursor; a push at cursor + 1 moves it; a hole pulls changes, applied by cseq, a page at a time', async () => {
  const { client, ws } = await online([{ gid: 'g', first_mid: 1, last_mid: 3, ack: 0, last_cseq: 4 }]);
  enter(client, ws, 'g', [entry(1), entry(2, { cseq: 4, reactions: { '👍': 2 }, mine: ['👍'] }), entry(3)], 4);
  assert.equal(client.changeCursor('g'), 4);
  assert.deepEqual(ws.take('changes'), [], 'a fresh first page: nothing to pull');
  assert.equal(client.viewMeta('g').catchingUp, false);
  assert.deepEqual(shown(client, 'g')[1], [2, 'm2', 0, false, { '👍': 2 }, ['👍']]);

  // cseq 5 = cursor + 1: applied, the cursor moves; the message is complete at 5.
  ws.push({ t: 'edited', gid: 'g', mid: 1, ver: 1, ts: 5, from: 'u2', body: 'm1 v1', cseq: 5 });
  assert.equal(client.changeCursor('g'), 5);
  assert.equal(client.groups.get('g').view.held.get(1).cseq, 5);
  assert.deepEqual(ws.take('changes'), []);

  // cseq 8: a hole (6 and 7 went elsewhere). Applied at once, but partial (its cseq
  // stays), and changes after 5 are pulled.
  ws.push(reacted('g', 3, 'u3', '🎉', true, 1, 8));
  assert.deepEqual(shown(client, 'g')[2], [3, 'm3', 0, false, { '🎉': 1 }, []]);
  const held3 = client.groups.get('g').view.held.get(3);
  assert.equal(held3.partial, true);
  assert.equal(held3.cseq, undefined);
  const [c1] = ws.take('changes');
  assert.deepEqual({ ...c1, rid: 0 }, { t: 'changes', gid: 'g', after: 5, limit: 500, rid: 0 });
  assert.equal(client.viewMeta('g').catchingUp, true, 'not current while changes are on their way');
  // Another push meanwhile: asked again after the reply, not twice at once.
  ws.push(reacted('g', 2, 'u3', '👍', true, 3, 9));
  assert.deepEqual(ws.take('changes'), []);
  // The reply: the recall (6) of mid 1 folded with nothing else; mid 3's state at 8
  // (with the edit 7 missed: the entry is its whole state). More to come.
  ws.push({ t: 'changes', rid: c1.rid, gid: 'g', after: 5, upto: 7, last_cseq: 9, first_mid: 1, last_mid: 3, more: true, msgs: [
    { mid: 1, from: 'u2', ts: 1001, ver: 2, recalled: true, cseq: 6 },
  ] });
  assert.equal(client.changeCursor('g'), 7);
  const [c2] = ws.take('changes');
  assert.equal(c2.after, 7, 'more: on after upto');
  ws.push({ t: 'changes', rid: c2.rid, gid: 'g', after: 7, upto: 9, last_cseq: 9, first_mid: 1, last_mid: 3, more: false, msgs: [
    entry(3, { ver: 1, body: 'm3 v1', cseq: 8, reactions: { '🎉': 1 } }),
    entry(2, { cseq: 9, reactions: { '👍': 3 }, mine: ['👍'] }),
  ] });
  assert.equal(client.changeCursor('g'), 9);
  assert.deepEqual(shown(client, 'g'), [
    [1, '', 2, true, {}, []],
    [2, 'm2', 0, false, { '👍': 3 }, ['👍']],
    [3, 'm3 v1', 1, false, { '🎉': 1 }, []],
  ]);
  assert.equal(client.groups.get('g').view.held.get(3).partial, undefined, 'the entry replaced the partial state');
  // The push of mid 2 (9) came while the pull was on its way: its page went past it.
  assert.deepEqual(ws.take('changes'), [], 'upto covers every cseq heard: no more');
  assert.equal(client.viewMeta('g').catchingUp, false);
  // An older push (cseq at or below what is held) changes nothing.
  ws.push(reacted('g', 2, 'u4', '👍', true, 2, 9));
  assert.deepEqual(shown(client, 'g')[1][4], { '👍': 3 });
  assert.deepEqual(client.changeLog.map((r) => [r.why, r.after, r.upto, r.entries, r.applied]), [
    ['hole', 5, 7, 1, 1],
    ['more', 7, 9, 2, 2],
  ]);
  // A `changed` beyond the cursor: pulled; a reply that says nothing new ends there.
  ws.push({ t: 'changed', gid: 'g', last_cseq: 12 });
  const [c3] = ws.take('changes');
  assert.equal(c3.after, 9);
  ws.push({ t: 'changes', rid: c3.rid, gid: 'g', after: 9, upto: 12, last_cseq: 12, first_mid: 2, last_mid: 3, more: false, msgs: [] });
  assert.equal(client.changeCursor('g'), 12);
  assert.deepEqual(shown(client, 'g').map((x) => x[0]), [2, 3], 'held below the horizon: dropped');
  assert.deepEqual(ws.take('changes'), [], 'nothing new: no loop');
  client.stop();
});

test('a reconnect pulls the changes missed, before the view is current again; changed pulls; no_group drops the group', async () => {
  const { client, ws } = await online([
    { gid: 'g', first_mid: 1, last_mid: 2, ack: 0, last_cseq: 0 },
    { gid: 'h', first_mid: 1, last_mid: 1, ack: 0, last_cseq: 0 },
  ]);
  enter(client, ws, 'h', [entry(1)], 0);
  enter(client, ws, 'g', [entry(1), entry(2)], 0);
  const views = [];
  client.addEventListener('view', (e) => e.detail.gid === 'g' && views.push(e.detail.meta.catchingUp));
  ws.drop();
  await sleep(1200); // the first backoff step is under a second
  const ws2 = FakeSocket.all.at(-1);
  assert.notEqual(ws2, ws);
  ws2.take('hello');
  // h moved while away (the welcome says so); g did not, but it is open: both pulled.
  ws2.push(welcome([
    { gid: 'g', first_mid: 1, last_mid: 2, ack: 2, last_cseq: 0 },
    { gid: 'h', first_mid: 1, last_mid: 1, ack: 1, last_cseq: 3 },
  ]));
  const pulls = ws2.take('changes');
  assert.deepEqual(pulls.map((c) => [c.gid, c.after]).sort(), [['g', 0], ['h', 0]]);
  assert.equal(client.viewMeta('g').catchingUp, true);
  const cg = pulls.find((c) => c.gid === 'g');
  ws2.push({ t: 'changes', rid: cg.rid, gid: 'g', after: 0, upto: 2, last_cseq: 2, first_mid: 1, last_mid: 2, more: false, msgs: [
    entry(2, { ver: 1, body: 'edited while away', cseq: 1 }),
    entry(1, { recalled: true, ver: 1, cseq: 2, body: undefined }),
  ] });
  await sleep(0);
  assert.equal(client.viewMeta('g').catchingUp, false);
  assert.equal(views.at(-1), false, 'the view event says current after the changes');
  assert.deepEqual(shown(client, 'g').map((x) => x.slice(0, 4)), [[1, '', 1, true], [2, 'edited while away', 1, false]]);
  // changed: pull after the cursor (a trim or an erasure, not pushed one by one).
  ws2.push({ t: 'changed', gid: 'g', last_cseq: 5 });
  const [c] = ws2.take('changes');
  assert.equal(c.after, 2);
  // The group was deleted meanwhile: no_group drops it.
  ws2.push({ t: 'err', rid: c.rid, gid: 'g', code: 'no_group', msg: 'no such group' });
  assert.equal(client.groups.has('g'), false);
  assert.equal(client.openGid, null);
  client.stop();
});

test('changes_gone_before: the cursor goes to last_cseq and the window held is paged again', async () => {
  const { client, ws } = await online([{ gid: 'g', first_mid: 1, last_mid: 3, ack: 0, last_cseq: 1 }]);
  enter(client, ws, 'g', [entry(1), entry(2), entry(3)], 1);
  client.close();
  client.open('g'); // the view kept: pulls the changes after its cursor
  const [c] = ws.take('changes');
  assert.equal(c.after, 1);
  ws.push({ t: 'changes', rid: c.rid, gid: 'g', after: 1, upto: 0, last_cseq: 500, changes_gone_before: 400, first_mid: 2, last_mid: 3, more: false, msgs: [] });
  assert.equal(client.changeCursor('g'), 500);
  const [p] = ws.take('pull');
  assert.deepEqual([p.after, p.limit], [1, 100], 'from the horizon: mid 1 is gone');
  assert.equal(client.viewMeta('g').catchingUp, true);
  ws.push({ t: 'page', rid: p.rid, gid: 'g', first_mid: 2, last_mid: 3, last_cseq: 500, more: false, msgs: [
    entry(2, { ver: 3, body: 'm2 v3', cseq: 450 }),
    entry(3),
  ] });
  assert.deepEqual(shown(client, 'g').map((x) => x.slice(0, 3)), [[2, 'm2 v3', 3], [3, 'm3', 0]]);
  assert.equal(client.viewMeta('g').catchingUp, false);
  assert.deepEqual(ws.take('changes'), []);
  client.stop();
});

test('a page read before changes already applied is re-checked: the changes after its last_cseq again', async () => {
  const { client, ws } = await online([{ gid: 'g', first_mid: 1, last_mid: 2, ack: 0, last_cseq: 2 }]);
  enter(client, ws, 'g', [entry(1)], 2);
  // mid 2 arrives live; mid 3 beyond it is missing... a pull after 2 goes out.
  ws.push({ t: 'msg', gid: 'g', mid: 3, from: 'u2', ts: 3, body: 'm3' });
  const [p] = ws.take('pull');
  // Before its answer, a reaction to mid 2 (not held yet) moves the cursor to 3.
  ws.push(reacted('g', 2, 'u2', '👍', true, 1, 3));
  assert.equal(client.changeCursor('g'), 3);
  // The page was read before it: its mid 2 lacks the reaction. Held partial, re-checked.
  ws.push({ t: 'page', rid: p.rid, gid: 'g', first_mid: 1, last_mid: 3, last_cseq: 2, more: false, msgs: [entry(2)] });
  assert.equal(client.groups.get('g').view.held.get(2).partial, true);
  const [c] = ws.take('changes');
  assert.equal(c.after, 2, 'after the page, not after the cursor');
  ws.push({ t: 'changes', rid: c.rid, gid: 'g', after: 2, upto: 3, last_cseq: 3, first_mid: 1, last_mid: 3, more: false, msgs: [entry(2, { cseq: 3, reactions: { '👍': 1 } })] });
  assert.deepEqual(shown(client, 'g')[1], [2, 'm2', 0, false, { '👍': 1 }, []]);
  assert.equal(client.changeCursor('g'), 3);
  client.stop();
});

test('react(): the frame, the reply applied (mine), pushes of others, duplicates, a recall drops them, bad keys refused', async () => {
  const { client, ws } = await online([{ gid: 'g', first_mid: 1, last_mid: 2, ack: 0, last_cseq: 0 }]);
  enter(client, ws, 'g', [entry(1), entry(2)], 0);
  const events = [];
  client.addEventListener('reacted', (e) => events.push([e.detail.uid, e.detail.key, e.detail.on, e.detail.count]));
  const p = client.react('g', 1, '❤️', true);
  const [f] = ws.take('react');
  assert.deepEqual({ ...f, rid: 0 }, { t: 'react', gid: 'g', mid: 1, key: '❤️', on: true, rid: 0 });
  ws.push(reacted('g', 1, 'u1', '❤️', true, 1, 1, { rid: f.rid }));
  assert.deepEqual(await p, { gid: 'g', mid: 1, uid: 'u1', key: '❤️', on: true, count: 1, cseq: 1, duplicate: false });
  assert.deepEqual(shown(client, 'g')[0], [1, 'm1', 0, false, { '❤️': 1 }, ['❤️']]);
  assert.deepEqual(client.reactionsOf('g', 1), [{ key: '❤️', count: 1, mine: true }]);
  // Another member's: the count moves, mine stays.
  ws.push(reacted('g', 1, 'u2', '❤️', true, 2, 2));
  assert.deepEqual(shown(client, 'g')[0], [1, 'm1', 0, false, { '❤️': 2 }, ['❤️']]);
  // Set again: duplicate, nothing changes, no event.
  const again = client.react('g', 1, '❤️', true);
  ws.push(reacted('g', 1, 'u1', '❤️', true, 2, 2, { rid: ws.take('react')[0].rid, duplicate: true }));
  assert.equal((await again).duplicate, true);
  // Cleared: the count drops, and it is not mine any more.
  const off = client.react('g', 1, '❤️', false);
  ws.push(reacted('g', 1, 'u1', '❤️', false, 1, 3, { rid: ws.take('react')[0].rid }));
  await off;
  assert.deepEqual(shown(client, 'g')[0], [1, 'm1', 0, false, { '❤️': 1 }, []]);
  // A recall drops the message's reactions.
  ws.push({ t: 'recalled', gid: 'g', mid: 1, ver: 1, ts: 9, from: 'u2', cseq: 4 });
  assert.deepEqual(shown(client, 'g')[0], [1, '', 1, true, {}, []]);
  assert.equal(client.changeCursor('g'), 4);
  assert.deepEqual(ws.take('changes'), [], 'each was cursor + 1: no pull');
  assert.deepEqual(events, [['u1', '❤️', true, 1], ['u2', '❤️', true, 2], ['u1', '❤️', false, 1]]);
  // Refused here: bad keys and mids, without a frame.
  for (const key of ['', 'x'.repeat(33), 'a\nb', 7]) await assert.rejects(client.react('g', 2, key, true), (e) => e.code === 'bad_field');
  await assert.rejects(client.react('g', 0, '👍', true), (e) => e.code === 'bad_field');
  assert.deepEqual(ws.take('react'), []);
  // Refused by the gateway: the code.
  const full = client.react('g', 2, 'k21', true);
  ws.push({ t: 'err', rid: ws.take('react')[0].rid, gid: 'g', code: 'too_large', msg: 'at most 20 keys a message' });
  await assert.rejects(full, (e) => e.code === 'too_large');
  // Offline: it waits, and goes out after the welcome.
  ws.drop();
  const later = client.react('g', 2, '👍', true);
  await sleep(1200);
  const ws2 = FakeSocket.all.at(-1);
  ws2.take('hello');
  ws2.push(welcome([{ gid: 'g', first_mid: 1, last_mid: 2, ack: 2, last_cseq: 4 }]));
  const [f2] = ws2.take('react');
  assert.deepEqual([f2.mid, f2.key, f2.on], [2, '👍', true]);
  ws2.push(reacted('g', 2, 'u1', '👍', true, 1, 5, { rid: f2.rid }));
  assert.equal((await later).count, 1);
  client.stop();
});

test('an older gateway (no last_cseq): no cursor, no changes asked for', async () => {
  const { client, ws } = await online([{ gid: 'g', last_mid: 1, ack: 0 }]);
  client.open('g');
  const [e] = ws.take('enter');
  ws.push({ t: 'page', rid: e.rid, gid: 'g', last_mid: 1, more: false, msgs: [entry(1)] });
  assert.equal(client.changeCursor('g'), null);
  ws.push({ t: 'edited', gid: 'g', mid: 1, ver: 1, ts: 5, from: 'u2', body: 'v1' });
  client.close();
  client.open('g');
  assert.deepEqual(ws.take('changes'), []);
  assert.deepEqual(shown(client, 'g')[0].slice(0, 3), [1, 'v1', 1]);
  client.stop();
});
