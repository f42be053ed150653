// What members see of each other, on the demo page: who is online in the open group,
// "bob is typing…" (gone after its ttl), "Seen by bob" under one's own message once bob
// has it on screen (and not before), only under the last of one's messages he has
// reached, and unread counted from what was seen (a badge only when there is any).
//
// The gateway pushes receipts every 300 ms here (--receipt-push-ms; 1000 by default) so
// that the waits stay short; the rest is as deployed.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';

let gw;
let browser;
let alice; // desktop
let bob; // phone
const people = [];

B.withGatewayAndBrowser({ extraArgs: ['--receipt-push-ms', '300'] }, async (g, b) => {
  gw = g;
  browser = b;
  ({ alice, bob } = await B.aliceAndBob(browser, gw.origin));
  people.push(alice, bob);
  // Bob is a member first (his client joins; the page does not open the group), then
  // alice joins and opens it, then bob opens it. The gateway's presence pushes say who
  // comes online or goes, not who joined a group meanwhile: someone who joins while
  // online shows to those who already have the group open once it says or types
  // something (the client asks again then), or when they open the group again.
  await bob.page.evaluate(() => window.gw.client.join('peers'));
  await bob.page.waitForSelector('#group-list li[data-gid="peers"]', { state: 'attached' });
  await B.joinGroup(alice.page, 'peers');
  await B.openGroup(bob.page, 'peers');
});

/** The "seen by" line under the message with this text ('' when there is none). */
async function seenLine(page, text) {
  return page.evaluate((t) => {
    const li = [...document.querySelectorAll('#msg-list li.msg')].find((x) => x.querySelector('.body').textContent === t);
    const seen = li && li.querySelector('.seen');
    return seen ? seen.textContent : '';
  }, text);
}

/** Wait until the "seen by" lines under these messages (text -> line) are as given. */
async function waitSeen(page, want) {
  try {
    await page.waitForFunction((w) => {
      const line = (t) => {
        const li = [...document.querySelectorAll('#msg-list li.msg')].find((x) => x.querySelector('.body').textContent === t);
        const seen = li && li.querySelector('.seen');
        return seen ? seen.textContent : '';
      };
      return Object.entries(w).every(([t, l]) => (Array.isArray(l) ? l.includes(line(t)) : line(t) === l));
    }, want);
  } catch (e) {
    const got = {};
    for (const t of Object.keys(want)) got[t] = await seenLine(page, t);
    e.message += `\nthe lines: ${JSON.stringify(got)}`;
    throw e;
  }
}

async function waitStored(page, text) {
  await page.waitForFunction(
    (t) => [...document.querySelectorAll('#msg-list li.msg[data-state="stored"]')].some((li) => li.querySelector('.body').textContent === t),
    text,
  );
}

test('each sees the other online in the open group', async () => {
  await alice.page.waitForSelector('#presence-list li[data-uid="bob"][data-online="true"]');
  await bob.page.waitForSelector('#presence-list li[data-uid="alice"][data-online="true"]');
  for (const p of people) {
    await p.page.waitForFunction(() => document.getElementById('presence-count').textContent === '2 of 2 online');
    assert.equal(await p.page.locator(`#presence-list li[data-uid="${p.label}"]`).count(), 0, `${p.label}: not listed to itself`);
  }
  B.assertNoErrors(assert, ...people);
});

test('bob types: alice sees "bob is typing…", and it goes after its ttl', async () => {
  await bob.page.click('#composer-input');
  await bob.page.keyboard.type('hel', { delay: 30 });
  await alice.page.waitForFunction(() => document.getElementById('typing').textContent === 'bob is typing…');
  await B.shot(alice.page, 'peers-typing-desktop.png');
  assert.equal(await bob.page.textContent('#typing'), '', 'not shown to the typist');
  const sent = (await B.counters(bob.page)).out.typing;
  assert.equal(sent, 1, 'three keys within 2 s: one typing sent');
  // No more keys: gone after the gateway's ttl_ms (5 s).
  const t0 = Date.now();
  await alice.page.waitForFunction(() => document.getElementById('typing').textContent === '');
  const gone = Date.now() - t0;
  assert.ok(gone > 2000, `shown until its ttl ran out (gone after ${gone} ms)`);
  await bob.page.fill('#composer-input', '');
  B.assertNoErrors(assert, ...people);
});

test('alice sees her message seen by bob once he has it on screen, and not before', async () => {
  await B.typeMessage(alice.page, 'are you there?');
  await waitStored(alice.page, 'are you there?');
  await waitStored(bob.page, 'are you there?'); // bob has the group open, at its end
  await alice.page.waitForFunction(() => [...document.querySelectorAll('#msg-list li.msg.own .seen')].some((s) => s.textContent === 'Seen by bob'));
  assert.equal(await seenLine(alice.page, 'are you there?'), 'Seen by bob');
  await B.shot(alice.page, 'peers-seen-desktop.png');

  // Bob looks at another group: alice's next message reaches his page, but he has not
  // seen it: it counts as unread for him, and alice's page does not say seen.
  await B.joinGroup(bob.page, 'elsewhere');
  await B.typeMessage(alice.page, 'when you are back');
  await waitStored(alice.page, 'when you are back');
  await bob.page.waitForSelector('#group-list li[data-gid="peers"][data-unread="1"]', { state: 'attached' });
  assert.equal(await B.badgeOf(bob.page, 'peers'), '1', 'the unread count shows as a badge');
  assert.equal(await B.badgeOf(bob.page, 'elsewhere'), null, 'no badge where nothing is unread (not "0")');
  await alice.page.waitForTimeout(2500); // longer than a read batch, the store's flush and a push
  assert.equal(await seenLine(alice.page, 'when you are back'), '', 'not seen while bob is elsewhere');
  assert.equal(await seenLine(alice.page, 'are you there?'), 'Seen by bob');

  // He comes back to the group: the message is on his screen, read, and seen.
  await B.openGroup(bob.page, 'peers');
  await waitStored(bob.page, 'when you are back');
  await bob.page.waitForSelector('#group-list li[data-gid="peers"][data-unread="0"]', { state: 'attached' });
  assert.equal(await B.badgeOf(bob.page, 'peers'), null, 'read: the badge goes');
  // "Seen by bob" moves to the last of alice's messages he has reached: it no longer
  // stands under the one before.
  await waitSeen(alice.page, { 'are you there?': '', 'when you are back': 'Seen by bob' });
  // The gateway agrees: bob's read is stored (a reload counts nothing unread).
  await bob.page.reload();
  await B.waitOnline(bob.page);
  await bob.page.waitForSelector('#group-list li[data-gid="peers"]', { state: 'attached' });
  assert.equal(await B.unreadOf(bob.page, 'peers'), 0);
  await B.openGroup(bob.page, 'peers');
  await waitStored(bob.page, 'when you are back');
  await B.shot(bob.page, 'peers-phone.png');
  const overflow = await bob.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal overflow at phone width (${overflow}px)`);
  B.assertNoErrors(assert, ...people);
});

test('with three in a group, each reader stands once: under the last of alice\'s messages it has reached', async () => {
  const carol = await B.newPerson(browser, { label: 'carol', viewport: B.DESKTOP });
  people.push(carol);
  await B.signIn(carol, gw.origin, 'carol');
  await B.joinGroup(carol.page, 'trio');
  await B.joinGroup(bob.page, 'trio');
  await B.joinGroup(alice.page, 'trio');
  // Bob and carol have the group open while alice writes two messages: both read them.
  for (const t of ['one', 'two']) {
    await B.typeMessage(alice.page, t);
    for (const p of [alice, bob, carol]) await waitStored(p.page, t);
  }
  const readTo = (p, mid) => p.page.waitForFunction((m) => window.gw.client.groups.get('trio').read >= m, mid);
  await readTo(bob, 2);
  // Bob looks at another group; alice's third message is read by carol only.
  await B.openGroup(bob.page, 'peers');
  await B.typeMessage(alice.page, 'three');
  await waitStored(carol.page, 'three');
  await readTo(carol, 3);
  await waitSeen(alice.page, { one: '', two: 'Seen by bob', three: 'Seen by carol' });
  await B.shot(alice.page, 'peers-seen-cursors-desktop.png');
  // Bob comes back and reads it: he moves from "two" to "three".
  await B.openGroup(bob.page, 'trio');
  await waitStored(bob.page, 'three');
  await waitSeen(alice.page, { one: '', two: '', three: ['Seen by bob, carol', 'Seen by carol, bob'] });
  for (const p of [alice, bob]) await B.openGroup(p.page, 'peers'); // where the next test expects them
  B.assertNoErrors(assert, ...people);
  await carol.context.close();
  people.pop();
});

test('bob signs out: alice no longer sees him online', async () => {
  await alice.page.waitForSelector('#presence-list li[data-uid="bob"]');
  await bob.page.click('#signout');
  await alice.page.waitForSelector('#presence-list li[data-uid="bob"]', { state: 'detached' });
  await alice.page.waitForFunction(() => document.getElementById('presence-count').textContent === '1 of 2 online');
  assert.match(await alice.page.getAttribute('#presence', 'title'), /Not online: bob \(last seen /);
  B.assertNoErrors(assert, ...people);
});
