// Live chat between two people, HTML as text, dedup/holes/notify, several tabs of one
// user, join/create/leave, the figures panel, and screenshots at desktop and phone sizes.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';

let gw;
let browser;
let alice; // desktop
let bob; // phone
const people = [];

B.withGatewayAndBrowser(undefined, async (g, b) => {
  gw = g;
  browser = b;
  ({ alice, bob } = await B.aliceAndBob(browser)); // signed in below, after the sign-in page's shot
  people.push(alice, bob);
  await bob.page.goto(gw.origin + '/');
  await bob.page.waitForSelector('#signin-name');
  await B.shot(bob.page, 'signin-phone.png');
  await B.signIn(alice, gw.origin, 'alice');
  await B.signIn(bob, gw.origin, 'bob');
});

after(() => {
  console.log(`screenshots in ${B.SCREENSHOTS}`);
});

test('two users chat in one group: each side shows the same mids, in order', async () => {
  await B.joinGroup(alice.page, 'lobby');
  await B.joinGroup(bob.page, 'lobby');
  const script = [
    [alice, 'Hi Bob, this is the gateway demo.'],
    [bob, 'Hi Alice! Messages get a mid when they are stored.'],
    [alice, 'And mine show as pending until the gateway confirms.'],
    [bob, 'Same order on both sides.'],
    [alice, 'Unicode too: héllo wörld ✓ ★'],
  ];
  for (const [who, text] of script) {
    await B.typeMessage(who.page, text);
    // The sender's copy turns from pending into stored, with its mid.
    await who.page.waitForFunction(
      (t) => [...document.querySelectorAll('#msg-list li.msg')].some((li) => li.querySelector('.body').textContent === t && li.dataset.state === 'stored' && li.dataset.mid),
      text,
    );
  }
  for (const p of [alice, bob]) {
    await p.page.waitForFunction((n) => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === n, script.length);
  }
  const a = await B.shownMessages(alice.page);
  const b = await B.shownMessages(bob.page);
  assert.deepEqual(a, b, 'both sides show the same messages');
  assert.deepEqual(
    a.map((m) => m.mid),
    [1, 2, 3, 4, 5],
    'mids are dense and in order',
  );
  assert.deepEqual(
    a.map((m) => [m.from, m.text]),
    script.map(([who, text]) => [who.label, text]),
  );
  for (const p of [alice, bob]) assert.equal((await B.chatInfo(p.page, assert)).text, '5 messages · 5 loaded');
  await B.shot(alice.page, 'chat-desktop.png');
  await B.shot(bob.page, 'chat-phone.png');
  // Phone width: nothing wider than the screen.
  const overflow = await bob.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal overflow at phone width (${overflow}px)`);
  B.assertNoErrors(assert, ...people);
});

test('a message containing HTML shows as text', async () => {
  const html = '<img src=x onerror="window.__xss=1"><b>bold?</b> <script>window.__xss=2</script> & &amp; <a href="javascript:alert(1)">link</a>';
  await B.typeMessage(bob.page, html);
  await alice.page.waitForFunction((t) => [...document.querySelectorAll('#msg-list .body')].some((b) => b.textContent === t), html);
  for (const p of [alice, bob]) {
    const found = await p.page.evaluate(() => ({
      elements: document.querySelectorAll('#msg-list .body *').length,
      xss: window.__xss,
    }));
    assert.equal(found.elements, 0, `${p.label}: no element made from message text`);
    assert.equal(found.xss, undefined, `${p.label}: no script ran`);
  }
  B.assertNoErrors(assert, ...people);
});

test('dedup by (gid, mid), holes filled by a pull, notify handled by pulling', async () => {
  const page = alice.page;
  const before = await B.shownMessages(page);
  // 1. The real gateway re-sends everything (a pull after 0) and pushes are replayed:
  //    nothing shows twice, nothing shown changes.
  await page.evaluate(() => {
    const c = window.gw.client;
    const g = c.groups.get('lobby');
    c.request({ t: 'pull', gid: 'lobby', after: 0, limit: 500 }, { kind: 'after', gid: 'lobby', view: g.view });
    for (const m of g.view.held.values()) c.dispatch({ t: 'msg', gid: 'lobby', mid: m.mid, from: 'mallory', ts: 1, body: 'replayed' });
  });
  await page.waitForFunction((n) => window.gw.client.counters.duplicates >= 2 * n, before.length);
  assert.deepEqual(await B.shownMessages(page), before, 'replays change nothing');

  // 2. A hole: the next two pushes are lost on the way; the third one shows a gap in
  //    the mids and the page pulls after its watermark to fill it.
  const pullsBefore = (await B.counters(page)).out.pull || 0;
  await page.evaluate(() => {
    const c = window.gw.client;
    const orig = c.dispatch.bind(c);
    let drop = 2;
    c.dispatch = (m) => (m.t === 'msg' && drop > 0 ? (drop--, undefined) : orig(m));
    window.__restoreDispatch = () => (c.dispatch = orig);
  });
  for (const t of ['hole 1', 'hole 2', 'hole 3']) {
    await B.typeMessage(bob.page, t);
    await bob.page.waitForFunction((x) => [...document.querySelectorAll('#msg-list li.msg[data-state="stored"] .body')].some((b) => b.textContent === x), t);
  }
  await page.waitForFunction(() => ['hole 1', 'hole 2', 'hole 3'].every((t) => [...document.querySelectorAll('#msg-list li.msg[data-state="stored"] .body')].some((b) => b.textContent === t)));
  const pullsAfter = (await B.counters(page)).out.pull || 0;
  assert.ok(pullsAfter > pullsBefore, 'the hole was filled by a pull');

  // 3. notify: pushes stop (as for a slow consumer) and the gateway says where the group
  //    is; the open group pulls after its watermark.
  await page.evaluate(() => {
    const c = window.gw.client;
    window.__restoreDispatch();
    const orig = c.dispatch.bind(c);
    c.dispatch = (m) => (m.t === 'msg' ? undefined : orig(m));
    window.__restoreDispatch = () => (c.dispatch = orig);
  });
  for (const t of ['notify 1', 'notify 2']) await B.typeMessage(bob.page, t);
  await bob.page.waitForFunction(() => window.gw.client.pending.size === 0);
  const lastMid = await bob.page.evaluate(() => window.gw.client.groups.get('lobby').lastMid);
  await page.evaluate((last) => {
    window.__restoreDispatch();
    window.gw.client.dispatch({ t: 'notify', gid: 'lobby', last_mid: last });
  }, lastMid);
  await page.waitForFunction((last) => document.querySelector(`#msg-list li.msg[data-mid="${last}"]`) !== null, lastMid);
  const a = await B.shownMessages(page);
  const b = await B.shownMessages(bob.page);
  assert.deepEqual(a, b, 'after holes and notify both sides show the same');
  assert.equal(new Set(a.map((m) => m.mid)).size, a.length, 'no mid twice');
  assert.deepEqual(
    a.map((m) => m.mid),
    a.map((_, i) => i + 1),
  );
  B.assertNoErrors(assert, ...people);
});

test('several tabs of one user: acks are shared, joins show up in the other tab', async () => {
  const tab2 = await B.newTab(alice, 'alice-tab2');
  await B.signIn(tab2, gw.origin, 'alice');
  // The first tab has lobby open and everything read.
  await alice.page.waitForFunction(() => {
    const g = window.gw.client.groups.get('lobby');
    return g.view.ackedTo === g.lastMid;
  });
  await tab2.page.waitForSelector('#group-list li[data-gid="lobby"][data-unread="0"]');
  const msgsBefore = (await B.counters(tab2.page)).in.msg || 0;
  for (const t of ['for both tabs 1', 'for both tabs 2', 'for both tabs 3']) await B.typeMessage(bob.page, t);
  // Tab 2 gets the pushes (unread goes up), then tab 1, which shows them, acks them and
  // tells tab 2: its count goes back to 0 without opening the group.
  await tab2.page.waitForFunction((n) => (window.gw.client.counters.in.msg || 0) >= n + 3, msgsBefore);
  await tab2.page.waitForSelector('#group-list li[data-gid="lobby"][data-unread="0"]');
  // The gateway agrees: a reload of tab 2 shows 0 unread too.
  await tab2.page.reload();
  await B.waitOnline(tab2.page);
  await tab2.page.waitForSelector('#group-list li[data-gid="lobby"]', { state: 'attached' });
  assert.equal(await B.unreadOf(tab2.page, 'lobby'), 0);
  assert.equal(await B.badgeOf(tab2.page, 'lobby'), null, 'nothing unread: no badge');
  // Creating a group in tab 2 (joining a new name) shows it in tab 1 as well.
  await B.joinGroup(tab2.page, 'alice-notes');
  await alice.page.waitForSelector('#group-list li[data-gid="alice-notes"]', { state: 'attached' });
  // Leaving it in tab 2: it goes from both lists.
  await tab2.page.click('#leave');
  await tab2.page.waitForSelector('#group-list li[data-gid="alice-notes"]', { state: 'detached' });
  await alice.page.waitForSelector('#group-list li[data-gid="alice-notes"]', { state: 'detached' });
  assert.equal(await tab2.page.isVisible('#chat-view'), false, 'the left group view is closed');
  await tab2.page.close();
  B.assertNoErrors(assert, ...people);
});

test('the figures panel reads /stats and its charts update', async () => {
  // Desktop: the panel is always on screen.
  const f0 = await alice.page.evaluate(() => window.gw.app.stats.fetches);
  await alice.page.waitForFunction((f) => window.gw.app.stats.fetches >= f + 2, f0);
  const conns = await alice.page.textContent('[data-chart="connections"] .v');
  assert.ok(Number(conns) >= 2, `connections shown: ${conns}`);
  const s = await gw.stats();
  assert.ok(s.acks.frames > 0 && s.messages.sends > 0);
  await alice.page.locator('#stats').screenshot({ path: B.screenshotPath('stats-panel-desktop.png') });
  // Phone: the panel is a view of its own, behind the Stats button.
  await bob.page.click('#stats-toggle');
  await bob.page.waitForSelector('#stats', { state: 'visible' });
  const f1 = await bob.page.evaluate(() => window.gw.app.stats.fetches);
  await bob.page.waitForFunction((f) => window.gw.app.stats.fetches >= f + 3, f1);
  await B.shot(bob.page, 'stats-phone.png');
  const overflow = await bob.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal overflow at phone width (${overflow}px)`);
  await bob.page.click('#stats-toggle');
  // Medium width (a tablet, a narrow window): groups and messages, the figures on demand.
  await alice.page.setViewportSize({ width: 900, height: 700 });
  assert.equal(await alice.page.isVisible('#stats'), false);
  await B.shot(alice.page, 'chat-medium.png');
  await alice.page.click('#stats-toggle');
  await alice.page.waitForSelector('#stats', { state: 'visible' });
  assert.equal(await alice.page.isVisible('#chat'), false);
  await B.shot(alice.page, 'stats-medium.png');
  await alice.page.click('#stats-toggle');
  await alice.page.setViewportSize(B.DESKTOP);
  B.assertNoErrors(assert, ...people);
});
