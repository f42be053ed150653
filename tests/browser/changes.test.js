// A window that comes back converges: alice's window holds a conversation and goes
// offline; meanwhile bob edits a message, deletes another and reacts, and carol (a third
// member, through the server API) is erased. alice comes back (the client pulls the
// changes after its cursor before the view is current) and shows exactly what bob
// shows: message by message, the sender, the text or "message deleted", the version, and
// the reaction counts; the reactions each user set are pressed on their own page only.
// Reactions between two online windows, by clicking, too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as B from './lib/browser.js';
import { waitFor } from './lib/gateway.js';

const KEY = 'browser-test-api-key-changes-0123456789';
const keyDir = mkdtempSync(join(tmpdir(), 'gw-changes-'));
writeFileSync(join(keyDir, 'api-key'), KEY + '\n');
const GID = 'changes';

let gw;
let alice; // desktop
let bob; // phone
const people = [];

B.withGatewayAndBrowser({ extraArgs: ['--api-key-file', join(keyDir, 'api-key')] }, async (g, browser) => {
  gw = g;
  ({ alice, bob } = await B.aliceAndBob(browser, gw.origin, GID));
  people.push(alice, bob);
});

/** The server API, from node: the answer's JSON, or throws unless it is a 2xx. */
async function api(method, path, body) {
  const data = body === undefined ? '' : JSON.stringify(body);
  const headers = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) };
  const r = await gw.request(method, '/api/v1' + path, { headers, body: data });
  if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.body}`);
  return JSON.parse(r.body);
}

/** What a page shows of every stored message: [mid, from, text, ver, deleted, reactions
 * ([key, count] of the keys with a count), the keys pressed (the user's own)]. */
async function shownState(page) {
  return page.$$eval('#msg-list li.msg[data-state="stored"]', (lis) =>
    lis.map((li) => {
      const chips = [...li.querySelectorAll('.reactions .react')];
      return [
        Number(li.dataset.mid),
        li.dataset.from,
        li.querySelector('.body').textContent,
        Number(li.dataset.ver),
        li.dataset.recalled === 'true',
        chips.filter((b) => Number(b.dataset.count) > 0).map((b) => [b.dataset.key, Number(b.dataset.count)]),
        chips.filter((b) => b.getAttribute('aria-pressed') === 'true').map((b) => b.dataset.key),
      ];
    }),
  );
}

const withoutOwn = (state) => state.map((m) => m.slice(0, 6));

/** Wait until what p shows, without the pressed keys, is `want`. */
async function waitShows(p, want, what) {
  let got = null;
  await waitFor(
    async () => {
      got = withoutOwn(await shownState(p.page));
      return JSON.stringify(got) === JSON.stringify(want);
    },
    { timeoutMs: B.WAIT, what: `${p.label}: ${what}` },
  ).catch((e) => {
    e.message += `\n${p.label} shows ${JSON.stringify(got)}\nwanted ${JSON.stringify(want)}`;
    throw e;
  });
}

const react = (p, mid, key) => p.page.click(`#msg-list li[data-mid="${mid}"] .reactions button[data-key="${key}"]`);

/** The view is current: online, and nothing (pages, changes) on its way. */
const current = (p) => B.waitState(p, GID, (g) => window.gw.client.state === 'online' && !window.gw.client.viewMeta(g).catchingUp, GID);

test('reactions: a click sets one, the other window sees the count at once; a second click takes it back', async () => {
  // carol writes through the API (she is erased later); alice and bob in their windows.
  await api('PUT', `/groups/${GID}/members/carol`);
  await api('POST', `/groups/${GID}/messages`, { from: 'carol', cid: 'c-1', body: 'carol was here' });
  for (const text of ['a2', 'a3']) await B.typeMessage(alice.page, text);
  for (const text of ['b4', 'b5', 'b6']) await B.typeMessage(bob.page, text);
  await B.waitAllSent(alice.page);
  await B.waitAllSent(bob.page);
  for (const p of people) await p.page.waitForFunction(() => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === 6);

  await react(alice, 4, '👍');
  await react(alice, 1, '😂');
  await react(bob, 1, '😂');
  const both = [
    [1, 'carol', 'carol was here', 0, false, [['😂', 2]]],
    [2, 'alice', 'a2', 0, false, []],
    [3, 'alice', 'a3', 0, false, []],
    [4, 'bob', 'b4', 0, false, [['👍', 1]]],
    [5, 'bob', 'b5', 0, false, []],
    [6, 'bob', 'b6', 0, false, []],
  ];
  for (const p of people) await waitShows(p, both, 'the reactions');
  const pressed = (s, mid) => s.find((m) => m[0] === mid)[6];
  const sa = await shownState(alice.page);
  const sb = await shownState(bob.page);
  assert.deepEqual([pressed(sa, 4), pressed(sb, 4)], [['👍'], []], "alice's own reaction is pressed on her page only");
  assert.deepEqual([pressed(sa, 1), pressed(sb, 1)], [['😂'], ['😂']]);
  await B.shot(alice.page, 'reactions-desktop.png');
  // Taken back: the count goes down everywhere.
  await react(bob, 1, '😂');
  for (const p of people) await waitShows(p, both.map((m) => (m[0] === 1 ? [...m.slice(0, 5), [['😂', 1]]] : m)), 'the reaction taken back');
  B.assertNoErrors(assert, ...people);
});

test('alice goes offline; bob edits, deletes and reacts, carol is erased; back, alice shows exactly what bob shows', async () => {
  await current(alice);
  const cursor = await alice.page.evaluate((g) => window.gw.client.changeCursor(g), GID);
  assert.ok(cursor > 0, `alice's change cursor: ${cursor}`);
  // Offline: the browser's network is off, and the connection it had is gone (the
  // browser says so of each attempt to reconnect meanwhile: expected).
  alice.allow.push(/ERR_INTERNET_DISCONNECTED/);
  await alice.context.setOffline(true);
  await alice.page.evaluate(() => window.gw.client.ws && window.gw.client.ws.close());
  await alice.page.waitForSelector('#conn:not([data-state="online"])');

  // bob, meanwhile: an edit, a deletion, reactions; and carol is erased.
  await bob.page.click('#msg-list li[data-mid="5"] button[data-act="edit"]');
  const box = '#msg-list li[data-mid="5"] textarea.edit-input';
  await bob.page.waitForSelector(box);
  await bob.page.fill(box, 'b5, edited while alice was away');
  await bob.page.press(box, 'Enter');
  await bob.page.click('#msg-list li[data-mid="6"] button[data-act="delete"]');
  await bob.page.click('#msg-list li[data-mid="6"] button[data-act="confirm-delete"]');
  await react(bob, 2, '❤️');
  await react(bob, 4, '🎉');
  await react(bob, 4, '👍');
  const erased = await api('DELETE', '/users/carol');
  assert.equal(erased.erased, 1);
  // The erasure's tombstone at the version the gateway gave it.
  const ver1 = (await api('GET', `/groups/${GID}/messages?after=0&limit=1`)).messages[0].ver || 0;
  const after = [
    [1, 'carol', 'message deleted', ver1, true, []],
    [2, 'alice', 'a2', 0, false, [['❤️', 1]]],
    [3, 'alice', 'a3', 0, false, []],
    [4, 'bob', 'b4', 0, false, [['👍', 2], ['🎉', 1]]],
    [5, 'bob', 'b5, edited while alice was away', 1, false, []],
    [6, 'bob', 'message deleted', 1, true, []],
  ];
  // What bob shows: the erased message too (erasure comes to online members as `changed`).
  await waitShows(bob, after, 'the changes');
  const bobShows = await shownState(bob.page);
  assert.notEqual(await alice.page.evaluate(() => window.gw.client.state), 'online', 'alice stayed offline through the changes');
  assert.notDeepEqual(withoutOwn(await shownState(alice.page)), withoutOwn(bobShows), 'alice does not show them yet');

  // Back online (the page's `online` event reconnects at once).
  await alice.context.setOffline(false);
  await B.waitOnline(alice.page);
  await current(alice);
  await waitShows(alice, withoutOwn(bobShows), "bob's view");
  const aliceShows = await shownState(alice.page);
  assert.deepEqual(withoutOwn(aliceShows), withoutOwn(bobShows), 'alice shows exactly what bob shows');
  const own = (s) => Object.fromEntries(s.filter((m) => m[6].length).map((m) => [m[0], m[6]]));
  assert.deepEqual(own(aliceShows), { 4: ['👍'] }, "alice's own reaction, pressed");
  assert.deepEqual(own(bobShows), { 2: ['❤️'], 4: ['👍', '🎉'] });
  // Caught up through `changes`: the messages changed (1, 2, 4, 5, 6), not the history.
  const log = await alice.page.evaluate(() => window.gw.client.changeLog);
  const catchUp = log.filter((x) => x.gid === GID && x.after >= cursor);
  const entries = catchUp.reduce((s, x) => s + x.entries, 0);
  assert.ok(entries >= 1 && entries <= 5, `the catch-up carried ${entries} messages: ${JSON.stringify(catchUp)}`);
  assert.equal(catchUp.filter((x) => x.gone).length, 0);
  await B.shot(alice.page, 'changes-after-offline-desktop.png');
  await B.shot(bob.page, 'changes-phone.png');
  B.assertNoErrors(assert, ...people);
});
