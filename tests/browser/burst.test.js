// A burst of 500 messages to an open group: the page acks in batches, as the protocol
// says (after ack_every new messages, or ack_delay_ms after the first unacked one), only
// ever its contiguous watermark, and the gateway counts the same ack frames.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { waitFor } from './lib/gateway.js';
import * as B from './lib/browser.js';

const N = 500;
let gw;
let browser;
B.withGatewayAndBrowser(undefined, (g, b) => {
  gw = g;
  browser = b;
});

test(`a burst of ${N} messages: ack frames stay within the protocol's batching`, async () => {
  const dave = await B.newPerson(browser, { label: 'dave', viewport: B.DESKTOP });
  const erin = await B.newPerson(browser, { label: 'erin', viewport: B.DESKTOP });
  await B.signIn(dave, gw.origin, 'dave');
  await B.signIn(erin, gw.origin, 'erin');
  await B.joinGroup(dave.page, 'burst');
  await B.joinGroup(erin.page, 'burst');
  const framesBefore = (await gw.stats()).acks.frames;
  const d0 = await B.counters(dave.page);
  const e0 = await B.counters(erin.page);

  const texts = Array.from({ length: N }, (_, i) => `burst ${i + 1}`);
  await B.sendMany(erin.page, 'burst', texts);
  await B.waitAllSent(erin.page, 60000);
  await dave.page.waitForFunction((n) => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === n, N, { timeout: 60000 });
  // The last ack comes at most ack_delay_ms after the last message.
  await dave.page.waitForFunction((n) => window.gw.client.groups.get('burst').view.ackedTo === n, N);
  await erin.page.waitForFunction((n) => window.gw.client.groups.get('burst').view.ackedTo === n, N);

  const d1 = await B.counters(dave.page);
  const e1 = await B.counters(erin.page);
  const acks = d1.ackLog.slice(d0.ackLog.length);
  const { ackEvery, ackDelayMs } = d1;
  assert.equal(ackEvery, 50, 'ack_every from welcome (the default)');
  assert.equal(ackDelayMs, 1000, 'ack_delay_ms from welcome (the default)');
  // Every ack frame is the contiguous watermark, one group, moving forward.
  let prev = 0;
  for (const a of acks) {
    assert.deepEqual(Object.keys(a.acks), ['burst']);
    assert.ok(a.acks.burst > prev, 'acks only move forward');
    assert.equal(a.acks.burst - prev, a.messages, 'an ack covers exactly the messages since the last');
    prev = a.acks.burst;
  }
  assert.equal(prev, N, 'acked up to the last message');
  // Why each frame was sent: ack_every messages were held, or ack_delay_ms passed since
  // the first unacked one (then fewer than ack_every were waiting).
  const byCount = acks.filter((a) => a.reason === 'count');
  const byDelay = acks.filter((a) => a.reason === 'delay');
  assert.equal(byCount.length + byDelay.length, acks.length, `only count and delay acks during the burst: ${JSON.stringify(acks.map((a) => a.reason))}`);
  for (const a of byCount) assert.ok(a.messages >= ackEvery, `a count ack covers >= ack_every (${a.messages})`);
  for (const a of byDelay) {
    assert.ok(a.messages < ackEvery, `a delay ack covers < ack_every (${a.messages})`);
    assert.ok(a.waited >= ackDelayMs - 5, `a delay ack waited ack_delay_ms (${a.waited})`);
  }
  assert.ok(byCount.length <= Math.floor(N / ackEvery), `at most N/ack_every count acks (${byCount.length})`);
  assert.ok(acks.length < N / 10, `ack frames ${acks.length} for ${N} messages`);
  // The gateway saw exactly the ack frames the two pages sent.
  const sent = acks.length + (e1.out.ack - (e0.out.ack || 0));
  await waitFor(async () => (await gw.stats()).acks.frames - framesBefore === sent, { what: `/stats acks.frames to grow by ${sent}` });
  const s = await gw.stats();
  console.log(`burst of ${N}: dave sent ${acks.length} ack frames (${byCount.length} after ack_every, ${byDelay.length} after ack_delay_ms); gateway: ${s.acks.deliveries_per_ack_frame.toFixed(1)} deliveries per ack frame`);
  // The figures panel after the burst.
  const f = await dave.page.evaluate(() => window.gw.app.stats.fetches);
  await dave.page.waitForFunction((x) => window.gw.app.stats.fetches >= x + 2, f);
  await dave.page.locator('#stats').screenshot({ path: B.screenshotPath('stats-panel-after-burst.png') });
  await B.shot(dave.page, 'burst-desktop.png');
  B.assertNoErrors(assert, dave, erin);
  await dave.context.close();
  await erin.context.close();
});
