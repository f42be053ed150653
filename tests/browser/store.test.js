// The gateway's store stops taking writes while pages are open (docs/PROTOCOL.md, Store
// trouble): the page says the gateway is waiting for its database instead of a plain
// "online" beside a message that stays "sending…", and the message is stored once the
// store is back. And a gateway that does not answer at all for a while: after a few
// seconds the page says the message is not confirmed yet.
//
// The store away, as tests/gateway/test_disk.c makes it on RocksDB without privileges:
// the gateway's file size limit set to 0 (prlimit), so every write of its store fails
// the way a full disk fails them; lifting the limit is the store coming back. The
// gateway answers sends with `unavailable` meanwhile, as it does on PostgreSQL while its
// database is down or failing over.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { waitFor } from './lib/gateway.js';
import * as B from './lib/browser.js';

let gw;
let browser;
let alice; // desktop
let bob; // phone
const people = [];
const GID = 'db';

B.withGatewayAndBrowser(undefined, async (g, b) => {
  gw = g;
  browser = b;
  ({ alice, bob } = await B.aliceAndBob(browser, gw.origin, GID));
  people.push(alice, bob);
});

/** The gateway's file size limit (soft): '0' makes every write of its store fail. */
function fileLimit(limit) {
  execFileSync('prlimit', ['--pid', String(gw.child.pid), `--fsize=${limit}:`]);
}

async function waitStored(page, text, timeout = B.WAIT) {
  await page.waitForFunction(
    (t) => [...document.querySelectorAll('#msg-list li.msg[data-state="stored"]')].some((li) => li.querySelector('.body').textContent === t),
    text,
    { timeout },
  );
}

test('the store does not take writes: the page says the gateway waits for its database; the message is stored once it is back', async () => {
  await B.typeMessage(alice.page, 'before the trouble');
  await waitStored(alice.page, 'before the trouble');
  await waitStored(bob.page, 'before the trouble');
  assert.equal(await B.connText(alice.page), 'online');

  fileLimit('0');
  try {
    // The store notices by itself (a probe when idle, or the next write): /healthz says so.
    await waitFor(async () => (await gw.get('/healthz')).status === 503, { timeoutMs: 10000, what: '/healthz 503' });
    await B.typeMessage(alice.page, 'while the store is away');
    // Refused with `unavailable` (and sent again with the same cid): the pill says why
    // the message waits, while the page stays online.
    await alice.page.waitForSelector('#conn[data-state="online"][data-store="unavailable"]');
    assert.equal(await B.connText(alice.page), 'online · waiting for the database');
    const shown = await B.shownMessages(alice.page);
    assert.deepEqual(shown.at(-1), { mid: null, from: 'alice', text: 'while the store is away', state: 'pending' });
    // The header counts the waiting message apart: it has no mid, it is not one of the
    // group's messages yet (it was "1 messages · 2 loaded").
    const info = await B.chatInfo(alice.page, assert);
    assert.equal(info.text, '1 message · 1 loaded · 1 sending');
    // Bob has nothing waiting: his pill has nothing to say of the store.
    assert.equal(await B.connText(bob.page), 'online');
    await B.shot(alice.page, 'store-unavailable-desktop.png');
    await alice.page.setViewportSize(B.PHONE);
    await B.shot(alice.page, 'store-unavailable-phone.png');
    await alice.page.setViewportSize(B.DESKTOP);
  } finally {
    fileLimit('unlimited');
  }

  // The store is back (the gateway retries after 1, 2, 4, then every 5 s; the page
  // resends after 1, 2, 4, 8 s): stored once, and the pill is plain "online" again.
  await B.waitState(alice, GID, () => window.gw.client.pending.size === 0, undefined, 40000);
  await waitStored(alice.page, 'while the store is away');
  await alice.page.waitForSelector('#conn[data-state="online"]:not([data-store])');
  assert.equal(await B.connText(alice.page), 'online');
  await waitStored(bob.page, 'while the store is away');
  const a = await B.shownMessages(alice.page);
  assert.deepEqual(a, await B.shownMessages(bob.page), 'both sides show the same');
  assert.deepEqual(
    a.map((m) => [m.mid, m.text]),
    [
      [1, 'before the trouble'],
      [2, 'while the store is away'],
    ],
    'stored once',
  );
  assert.equal((await B.chatInfo(alice.page, assert)).text, '2 messages · 2 loaded');
  B.assertNoErrors(assert, ...people);
});

test('the gateway does not answer a send for a while: after 3 s the page says it is not confirmed yet', async () => {
  // The gateway stopped (SIGSTOP): the connection stays up, nothing is answered, as
  // while a commit hangs on a database that went away without a word.
  gw.child.kill('SIGSTOP');
  let waited;
  try {
    await B.typeMessage(alice.page, 'nobody answers');
    const t0 = Date.now();
    await alice.page.waitForTimeout(2000);
    assert.equal(await B.connText(alice.page), 'online', 'a send is not late after 2 s');
    await alice.page.waitForSelector('#conn[data-state="online"][data-store="slow"]', { timeout: 10000 });
    waited = Date.now() - t0;
    assert.equal(await B.connText(alice.page), 'online · not confirmed yet');
    assert.equal((await B.chatInfo(alice.page, assert)).text, '2 messages · 2 loaded · 1 sending');
    await B.shot(alice.page, 'store-slow-desktop.png');
  } finally {
    gw.child.kill('SIGCONT');
  }
  assert.ok(waited >= 2500, `said after about 3 s (${waited} ms)`);
  await waitStored(alice.page, 'nobody answers');
  await alice.page.waitForSelector('#conn[data-state="online"]:not([data-store])');
  assert.equal((await B.chatInfo(alice.page, assert)).text, '3 messages · 3 loaded');
  B.assertNoErrors(assert, ...people);
});
