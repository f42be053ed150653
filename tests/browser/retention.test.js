// Retention on the demo page: a gateway that keeps the last 5 messages of each group
// (--retain-messages 5). Alice sends 20; once a retention pass has moved the group's
// horizon to 16, carol (a member since before, away meanwhile: her ack is below the
// horizon) and bob (who joins afterwards) open the group and see exactly mids 16..20,
// under the line "Older messages are no longer kept", not "This is the start". Alice,
// who held all 20 before they were deleted, converges to the same (her client pulls the
// changes when the pass says `changed`, and drops what is below the horizon).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';
import { waitFor } from './lib/gateway.js';

const KEEP = 5;
const N = 20;
const GID = 'retained';
const GONE = 'Older messages are no longer kept';
let gw;
let browser;
B.withGatewayAndBrowser({ extraArgs: ['--retain-messages', String(KEEP)] }, (g, b) => {
  gw = g;
  browser = b;
});

/** The line at the top of the history, and its state (more, loading, start, gone). */
async function topLine(page) {
  return page.evaluate(() => {
    const older = document.getElementById('older');
    return { state: older.dataset.state, text: older.innerText.trim() };
  });
}

/** The group's view has settled at its top: the line shows, nothing is loading. */
async function waitTop(p, want) {
  let got = null;
  await waitFor(
    async () => {
      got = await topLine(p.page);
      return got.text === want.text && got.state === want.state;
    },
    { timeoutMs: B.WAIT, what: `${p.label}: the top of the history to show ${JSON.stringify(want)}` },
  ).catch(async (e) => {
    e.message += `\n${p.label}: shows ${JSON.stringify(got)}; ${JSON.stringify(await B.clientState(p.page, GID).catch((x) => x.message))}`;
    throw e;
  });
}

async function waitKept(p) {
  await B.waitState(p, GID, (n) => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === n && !window.gw.client.viewMeta('retained').catchingUp, KEEP);
  await waitTop(p, { state: 'gone', text: GONE });
  const shown = await B.shownMessages(p.page);
  const want = Array.from({ length: KEEP }, (_, i) => N - KEEP + 1 + i);
  assert.deepEqual(shown.map((m) => m.mid), want, `${p.label}: exactly the last ${KEEP} (mids ${want[0]}..${N}), dense`);
  assert.deepEqual(shown.map((m) => m.text), want.map((mid) => `kept or not ${mid}`));
  assert.equal((await B.chatInfo(p.page, assert)).text, `${KEEP} messages · ${KEEP} loaded`);
}

test(`a group that keeps its last ${KEEP} messages: older ones show as no longer kept`, async () => {
  const alice = await B.newPerson(browser, { label: 'alice', viewport: B.DESKTOP });
  const carol = await B.newPerson(browser, { label: 'carol', viewport: B.PHONE });
  const bob = await B.newPerson(browser, { label: 'bob', viewport: B.DESKTOP });
  await B.signIn(carol, gw.origin, 'carol');
  await B.joinGroup(carol.page, GID); // a new group: carol creates it
  await carol.page.close(); // carol goes away, her ack at 0

  await B.signIn(alice, gw.origin, 'alice');
  await B.joinGroup(alice.page, GID);
  await B.sendMany(alice.page, GID, Array.from({ length: N }, (_, i) => `kept or not ${i + 1}`));
  await B.waitAllSent(alice.page);

  // Retention passes run about once a second: ask for the group list until its horizon
  // moved (bounded).
  const firstMid = await waitFor(
    () =>
      alice.page.evaluate((gid) => {
        const c = window.gw.client;
        const g = c.groupList().find((x) => x.gid === gid);
        if (g && g.firstMid > 1) return g.firstMid;
        c.refreshGroups();
        return 0;
      }, GID),
    { timeoutMs: 15000, intervalMs: 250, what: 'the horizon to move' },
  );
  assert.equal(firstMid, N - KEEP + 1);
  // Alice held all of them before they were deleted: the retention pass pushed
  // `changed`, and her client's change cursor (a `changes` reply says the group's horizon)
  // drops what the group no longer keeps: she shows what everyone else does.
  await waitKept(alice);

  // Carol comes back: only what is kept counts as unread; opening the group enters
  // after her ack, below the horizon: the first page starts at it.
  carol.page = (await B.newTab(carol, 'carol')).page;
  await B.signIn(carol, gw.origin, 'carol');
  await carol.page.waitForSelector(`#group-list li[data-gid="${GID}"][data-unread="${KEEP}"]`);
  await B.openGroup(carol.page, GID);
  await waitKept(carol);
  await B.shot(carol.page, 'retention-phone.png');

  // Bob joins now: older history, pulled as the view fills, stops at the horizon.
  await B.signIn(bob, gw.origin, 'bob');
  await B.joinGroup(bob.page, GID);
  await waitKept(bob);
  const c = await B.counters(bob.page);
  assert.ok((c.out.pull || 0) <= 2, `no pull loop below the horizon (${c.out.pull} pulls)`);
  await B.shot(bob.page, 'retention-desktop.png');

  // Alice reloads: she too sees only what is kept now.
  await alice.page.reload();
  await B.waitOnline(alice.page);
  await alice.page.waitForSelector(`#group-list li[data-gid="${GID}"]`, { state: 'attached' });
  await B.openGroup(alice.page, GID);
  await waitKept(alice);
  B.assertNoErrors(assert, alice, carol, bob);
});
