// A message's later versions on the demo page: alice edits one of her messages and
// deletes another; bob sees the new text with "(edited)", and "message deleted" (from
// alice) in place of the other, live and again after a reload. Only one's own messages
// offer "edit" and "delete".

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';
import { waitFor } from './lib/gateway.js';

let gw;
let browser;
let alice; // desktop
let bob; // phone
const people = [];

B.withGatewayAndBrowser(undefined, async (g, b) => {
  gw = g;
  browser = b;
  ({ alice, bob } = await B.aliceAndBob(browser, gw.origin, 'edits'));
  people.push(alice, bob);
});

/** What the page shows of message mid: its sender, body, "(edited)", whether it is a
 * deleted one, and the actions under it (null while it is not shown). */
async function shownMessage(page, mid) {
  return page.evaluate((mid) => {
    const li = document.querySelector(`#msg-list li.msg[data-mid="${mid}"]`);
    if (!li) return null;
    const body = li.querySelector('.body');
    return {
      from: li.dataset.from,
      text: body ? body.textContent : null,
      edited: li.querySelector('.meta .edited') ? li.querySelector('.meta .edited').textContent : '',
      deleted: li.dataset.recalled === 'true',
      acts: [...li.querySelectorAll('.acts button')].filter((b) => !b.hidden).map((b) => b.dataset.act),
    };
  }, mid);
}

/** Wait until message mid shows as `want` ({from, text, edited, deleted, acts}). */
async function waitShown(p, mid, want) {
  let got = null;
  await waitFor(
    async () => {
      got = await shownMessage(p.page, mid);
      return got && JSON.stringify(got) === JSON.stringify(want);
    },
    { timeoutMs: B.WAIT, what: `${p.label}: #${mid} to show as ${JSON.stringify(want)}` },
  ).catch((e) => {
    e.message += `\n${p.label}: #${mid} shows ${JSON.stringify(got)}`;
    throw e;
  });
}

const plain = (from, text, acts) => ({ from, text, edited: '', deleted: false, acts });
const OWN = ['edit', 'delete'];

test('alice edits her message: bob sees the new text with "(edited)"; only own messages offer edit and delete', async () => {
  for (const text of ['the first draft', 'this one goes', 'a third']) await B.typeMessage(alice.page, text);
  await B.typeMessage(bob.page, 'reading along');
  await B.waitAllSent(alice.page);
  await B.waitAllSent(bob.page);
  for (const p of people) {
    await p.page.waitForFunction(() => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === 4);
  }
  await waitShown(alice, 1, plain('alice', 'the first draft', OWN));
  await waitShown(bob, 1, plain('alice', 'the first draft', []));
  await waitShown(bob, 4, plain('bob', 'reading along', OWN));
  await waitShown(alice, 4, plain('bob', 'reading along', []));

  // Escape gives an edit up: nothing is sent.
  await alice.page.click('#msg-list li[data-mid="3"] button[data-act="edit"]');
  await alice.page.waitForSelector('#msg-list li[data-mid="3"] textarea.edit-input');
  await alice.page.press('#msg-list li[data-mid="3"] textarea.edit-input', 'Escape');
  await waitShown(alice, 3, plain('alice', 'a third', OWN));

  await alice.page.click('#msg-list li[data-mid="1"] button[data-act="edit"]');
  const box = '#msg-list li[data-mid="1"] textarea.edit-input';
  await alice.page.waitForSelector(box);
  assert.equal(await alice.page.inputValue(box), 'the first draft', 'the editor starts from the text shown');
  await B.shot(alice.page, 'edits-editor-desktop.png');
  await alice.page.fill(box, 'the final text');
  await alice.page.press(box, 'Enter');
  const edited = { from: 'alice', text: 'the final text', edited: '(edited)', deleted: false };
  await waitShown(alice, 1, { ...edited, acts: OWN });
  await waitShown(bob, 1, { ...edited, acts: [] });
  assert.equal((await B.counters(alice.page)).out.edit, 1, 'one edit sent');
  await waitShown(bob, 2, plain('alice', 'this one goes', []));
  B.assertNoErrors(assert, ...people);
});

test('alice deletes a message: bob sees "message deleted" from alice in its place', async () => {
  await alice.page.click('#msg-list li[data-mid="2"] button[data-act="delete"]');
  // Asked once more, inline; cancel keeps it.
  await alice.page.waitForSelector('#msg-list li[data-mid="2"] .acts .ask');
  assert.equal(await alice.page.textContent('#msg-list li[data-mid="2"] .acts .ask'), 'Delete for everyone?');
  await alice.page.click('#msg-list li[data-mid="2"] button[data-act="cancel"]');
  await waitShown(alice, 2, plain('alice', 'this one goes', OWN));
  await alice.page.click('#msg-list li[data-mid="2"] button[data-act="delete"]');
  await alice.page.click('#msg-list li[data-mid="2"] button[data-act="confirm-delete"]');
  const deleted = { from: 'alice', text: 'message deleted', edited: '', deleted: true, acts: [] };
  await waitShown(alice, 2, deleted);
  await waitShown(bob, 2, deleted);
  assert.equal((await B.counters(alice.page)).out.recall, 1, 'one recall sent');
  await B.shot(alice.page, 'edits-desktop.png');
  await B.shot(bob.page, 'edits-phone.png');
  const overflow = await bob.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal overflow at phone width (${overflow}px)`);
  B.assertNoErrors(assert, ...people);
});

test('after a reload, the edited message and the deleted one show the same', async () => {
  for (const p of people) {
    await p.page.reload();
    await B.waitOnline(p.page);
    await p.page.waitForSelector('#group-list li[data-gid="edits"]', { state: 'attached' });
    await B.openGroup(p.page, 'edits');
    await p.page.waitForFunction(() => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === 4);
  }
  await waitShown(bob, 1, { from: 'alice', text: 'the final text', edited: '(edited)', deleted: false, acts: [] });
  await waitShown(bob, 2, { from: 'alice', text: 'message deleted', edited: '', deleted: true, acts: [] });
  await waitShown(bob, 3, plain('alice', 'a third', []));
  await waitShown(alice, 1, { from: 'alice', text: 'the final text', edited: '(edited)', deleted: false, acts: OWN });
  await waitShown(alice, 2, { from: 'alice', text: 'message deleted', edited: '', deleted: true, acts: [] });
  await waitShown(alice, 4, plain('bob', 'reading along', []));
  B.assertNoErrors(assert, ...people);
});
