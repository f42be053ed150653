// Nothing lost while you are away, unread counts without downloading history, the lazy
// paged pull when the group is opened, and unread counted from what was on screen.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';

const N = 250;
let gw;
let browser;
B.withGatewayAndBrowser(undefined, (g, b) => {
  gw = g;
  browser = b;
});

test(`away while ${N} messages are sent: unread ${N} without a pull, then pages on opening, then 0 after reload`, async () => {
  const carol = await B.newPerson(browser, { label: 'carol', viewport: B.PHONE });
  const alice = await B.newPerson(browser, { label: 'alice', viewport: B.DESKTOP });
  await B.signIn(carol, gw.origin, 'carol');
  await B.joinGroup(carol.page, 'backlog'); // a new group: carol creates it
  await carol.page.close(); // carol closes the page

  await B.signIn(alice, gw.origin, 'alice');
  await B.joinGroup(alice.page, 'backlog');
  const texts = Array.from({ length: N }, (_, i) => `backlog message ${i + 1} of ${N}`);
  await B.sendMany(alice.page, 'backlog', texts);
  await B.waitAllSent(alice.page, 60000);

  // Carol comes back: the count comes with sign-in, and nothing is pulled.
  carol.page = (await B.newTab(carol, 'carol')).page;
  await B.signIn(carol, gw.origin, 'carol');
  await carol.page.waitForSelector(`#group-list li[data-gid="backlog"][data-unread="${N}"]`);
  const c0 = await B.counters(carol.page);
  assert.equal(c0.out.enter || 0, 0, 'no enter before the group is opened');
  assert.equal(c0.out.pull || 0, 0, 'no pull before the group is opened');
  assert.equal(c0.in.page || 0, 0, 'no page received before the group is opened');
  assert.equal(await carol.page.locator('#msg-list li.msg').count(), 0);
  assert.equal(await B.badgeOf(carol.page, 'backlog'), String(N), 'the count as a badge');
  await B.shot(carol.page, 'groups-unread-phone.png');

  // Opening it: pages arrive, each acked, and every message shows once, in order.
  await B.openGroup(carol.page, 'backlog');
  await carol.page.waitForFunction((n) => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length >= n, N, { timeout: 60000 });
  const shown = await B.shownMessages(carol.page);
  assert.equal(shown.length, N, 'exactly the messages sent');
  assert.deepEqual(
    shown.map((m) => m.mid),
    texts.map((_, i) => i + 1),
    'mids 1..N, each once, in order',
  );
  assert.deepEqual(
    shown.map((m) => m.text),
    texts,
  );
  const c1 = await B.counters(carol.page);
  assert.equal(c1.out.enter, 1, 'one enter');
  assert.ok(c1.in.page >= Math.ceil(N / 100), `pages arrived one at a time (${c1.in.page})`);
  const pageAcks = c1.ackLog.filter((a) => a.reason === 'page');
  assert.ok(pageAcks.length >= Math.ceil(N / 100), `each page acked (${pageAcks.length} ack frames)`);
  assert.equal(Math.max(...c1.ackLog.map((a) => a.acks.backlog || 0)), N, 'acked up to the last one');
  await B.shot(carol.page, 'backlog-phone.png');
  assert.equal((await B.chatInfo(carol.page, assert)).text, `${N} messages · ${N} loaded`);

  // The view opened at her first unread message: what was on screen is read, the rest
  // still counts as unread. She scrolls to the end: all read (sent at once: more than
  // ack_every messages' worth).
  const readFirst = await carol.page.waitForFunction((n) => {
    const { read } = window.gw.client.groupList().find((g) => g.gid === 'backlog');
    const shown = document.querySelector('#group-list li[data-gid="backlog"]').dataset.unread;
    return read > 0 && Number(shown) === n - read && read;
  }, N);
  assert.ok((await readFirst.jsonValue()) < N, `read up to what was on screen (${await readFirst.jsonValue()} of ${N})`);
  await carol.page.evaluate(() => {
    const sc = document.getElementById('messages');
    sc.scrollTop = sc.scrollHeight;
  });
  await carol.page.waitForFunction((n) => window.gw.client.groups.get('backlog').read === n, N);

  // A reload: nothing unread any more, and still nothing pulled before opening.
  await carol.page.reload();
  await B.waitOnline(carol.page);
  await carol.page.waitForSelector('#group-list li[data-gid="backlog"]', { state: 'attached' });
  assert.equal(await B.unreadOf(carol.page, 'backlog'), 0, 'unread 0 after reload');
  assert.equal(await B.badgeOf(carol.page, 'backlog'), null, 'nothing unread: no badge (not "0")');
  const c2 = await B.counters(carol.page);
  assert.equal((c2.out.enter || 0) + (c2.out.pull || 0), 0);
  B.assertNoErrors(assert, carol, alice);
  await carol.context.close();
  await alice.context.close();
});
