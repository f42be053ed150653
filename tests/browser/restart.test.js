// The gateway dies (SIGKILL) and comes back while pages are open: they reconnect by
// themselves, messages written meanwhile are stored once, and everything shows once.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from './lib/gateway.js';
import * as B from './lib/browser.js';

let gw;
let browser;
B.withGatewayAndBrowser(undefined, (g, b) => {
  gw = g;
  browser = b;
});

// While the gateway is down on purpose, the browser itself logs its failed connection
// attempts (WebSocket and fetch) as console errors: those are expected, nothing else is.
const OUTAGE = [/WebSocket connection to .* failed/, /ERR_CONNECTION_REFUSED/, /Failed to load resource/];

// "reconnecting…", the reason, and the countdown to the next try of the backoff.
const RECONNECTING = /^reconnecting… \((connection lost|gateway restarting)\) · next try in \d+ s$/;

/** From now on, every text the connection pill shows (read by pillTexts). */
async function recordPill(page) {
  await page.evaluate(() => {
    const el = document.getElementById('conn-text');
    const texts = (window.__pillTexts = [el.textContent]);
    const note = () => texts.at(-1) !== el.textContent && texts.push(el.textContent);
    new MutationObserver(note).observe(el, { childList: true, characterData: true, subtree: true });
  });
}

/** The pill's texts since recordPill, the countdown's seconds made one ("next try in N s"). */
async function pillTexts(page) {
  const texts = await page.evaluate(() => window.__pillTexts);
  return texts.map((t) => t.replace(/next try in \d+ s/, 'next try in N s')).filter((t, i, a) => t !== a[i - 1]);
}

test('gateway killed and restarted: pages reconnect, messages sent meanwhile show exactly once', async () => {
  const { alice, bob } = await B.aliceAndBob(browser, gw.origin, 'ops');
  const carol = await B.newPerson(browser, { label: 'carol', viewport: B.DESKTOP });
  // Bob is also in a group he does not have open: its count must refresh on resume.
  await B.joinGroup(bob.page, 'side');
  await B.openGroup(bob.page, 'ops');
  await B.typeMessage(alice.page, 'before the crash 1');
  await B.typeMessage(bob.page, 'before the crash 2');
  for (const p of [alice, bob]) await p.page.waitForFunction(() => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === 2);

  alice.allow.push(...OUTAGE);
  bob.allow.push(...OUTAGE);
  for (const p of [alice, bob]) await recordPill(p.page);
  await gw.kill();
  for (const p of [alice, bob]) await p.page.waitForSelector('#conn[data-state="offline"]');
  // The pages retry by themselves, with their backoff: "reconnecting…", not a bare
  // "offline (connection lost)".
  for (const p of [alice, bob]) assert.match(await B.connText(p.page), RECONNECTING, `${p.label}: the pill while the gateway is down`);

  // Written while the gateway is down: shown as pending, no mid yet.
  await B.typeMessage(alice.page, 'written while the gateway was down');
  await B.typeMessage(bob.page, 'bob too, while it was down');
  const pending = await B.shownMessages(alice.page);
  assert.deepEqual(pending.at(-1), { mid: null, from: 'alice', text: 'written while the gateway was down', state: 'pending' });
  // The header counts it apart: it is not one of the group's messages before it is stored.
  assert.equal((await B.chatInfo(alice.page, assert)).text, '2 messages · 2 loaded · 1 sending');
  await B.shot(alice.page, 'offline-desktop.png');

  await gw.restart();
  // Carol writes as soon as the gateway is back, while the pages may still be waiting out
  // their backoff.
  await B.signIn(carol, gw.origin, 'carol');
  await B.joinGroup(carol.page, 'ops');
  const meanwhile = Array.from({ length: 20 }, (_, i) => `meanwhile ${i + 1}`);
  await B.sendMany(carol.page, 'ops', meanwhile);
  await B.joinGroup(carol.page, 'side');
  await B.sendMany(carol.page, 'side', ['side 1', 'side 2', 'side 3']);
  await B.waitAllSent(carol.page);
  await B.openGroup(carol.page, 'ops');

  // The pages come back by themselves.
  for (const p of [alice, bob]) await B.waitOnline(p.page, 60000);
  // All the while, the pill said it was reconnecting (trying, or waiting for the next
  // try), then online.
  for (const p of [alice, bob]) {
    const texts = await pillTexts(p.page);
    assert.equal(texts[0], 'online');
    assert.equal(texts.at(-1), 'online');
    const between = texts.slice(1, -1);
    assert.ok(between.length > 0, `${p.label}: the pill changed: ${JSON.stringify(texts)}`);
    for (const t of between) assert.match(t, /^reconnecting…/, `${p.label}: ${JSON.stringify(texts)}`);
  }
  const total = 2 + 2 + meanwhile.length;
  for (const p of [alice, bob]) {
    await B.waitState(p, 'ops', (n) => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length >= n && window.gw.client.pending.size === 0, total, 30000);
  }
  const a = await B.shownMessages(alice.page);
  const b = await B.shownMessages(bob.page);
  assert.equal(a.length, total, 'alice: each message once');
  assert.deepEqual(a, b, 'alice and bob show the same');
  assert.deepEqual(
    a.map((m) => m.mid),
    a.map((_, i) => i + 1),
    'mids dense, in order, none twice',
  );
  // Carol (who joined after the restart; older history loads as she scrolls up) shows
  // her messages with the mids the others show.
  await B.waitState(carol, 'ops', (t) => t.every((x) => [...document.querySelectorAll('#msg-list li.msg[data-state="stored"] .body')].some((b) => b.textContent === x)), meanwhile);
  const c = await B.shownMessages(carol.page);
  for (const m of c) assert.deepEqual(m, a[m.mid - 1], `carol's #${m.mid} is the same as alice's`);
  const texts = a.map((m) => m.text);
  for (const t of ['written while the gateway was down', 'bob too, while it was down', ...meanwhile]) {
    assert.equal(texts.filter((x) => x === t).length, 1, `"${t}" shows once`);
  }
  // The group bob did not have open: its count refreshed (3 new).
  await waitFor(async () => (await B.unreadOf(bob.page, 'side')) === 3, { what: 'bob: side unread 3' });
  for (const p of [alice, bob]) assert.ok((await B.counters(p.page)).connects >= 2, `${p.label} reconnected`);
  for (const p of [alice, bob, carol]) assert.equal((await B.chatInfo(p.page, assert)).sending, 0);
  await B.shot(bob.page, 'after-restart-phone.png');
  B.assertNoErrors(assert, alice, bob, carol);
  for (const p of [alice, bob, carol]) await p.context.close();
});

test('gateway stopped (SIGTERM) and started again: the page says "reconnecting… (gateway restarting)" until it is back', async () => {
  // Running (the test before may have failed while it was down).
  if (gw.child.exitCode !== null || gw.child.signalCode !== null) await gw.restart();
  const dave = await B.newPerson(browser, { label: 'dave', viewport: B.PHONE });
  await B.signIn(dave, gw.origin, 'dave');
  await B.joinGroup(dave.page, 'ops');
  dave.allow.push(...OUTAGE);
  await recordPill(dave.page);
  await gw.stop(); // sessions closed with 1001
  await dave.page.waitForSelector('#conn[data-state="offline"]');
  assert.match(await B.connText(dave.page), /^reconnecting… \(gateway restarting\) · next try in \d+ s$/);
  await B.shot(dave.page, 'reconnecting-phone.png');
  await gw.restart();
  await B.waitOnline(dave.page, 60000);
  const texts = await pillTexts(dave.page);
  assert.equal(texts[1], 'reconnecting… (gateway restarting) · next try in N s', JSON.stringify(texts));
  for (const t of texts.slice(1, -1)) assert.match(t, /^reconnecting…/, JSON.stringify(texts));
  assert.equal(texts.at(-1), 'online');
  B.assertNoErrors(assert, dave);
  await dave.context.close();
});
