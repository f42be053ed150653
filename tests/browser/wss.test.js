// The page as a real user gets it from tools/run.sh: https:// with the gateway's own
// self-signed certificate, and the WebSocket over wss:// (derived from the page's URL).
//
// The second test checks what once failed: the gateway offered HTTP/2 (ALPN h2), the page
// loaded over it, and Chromium then opened the WebSocket on that HTTP/2 connection
// (RFC 8441), which the gateway refused; a second window or a reload never connected.
// The gateway now offers only http/1.1.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as B from './lib/browser.js';

let gw;
let browser;
B.withGatewayAndBrowser({ tls: true }, (g, b) => {
  gw = g;
  browser = b;
});

test('over https: sign in, chat over wss://, same mids on both sides', async () => {
  const alice = await B.newPerson(browser, { label: 'alice', viewport: B.DESKTOP });
  const bob = await B.newPerson(browser, { label: 'bob', viewport: B.PHONE });
  await B.signIn(alice, gw.origin, 'alice');
  await B.signIn(bob, gw.origin, 'bob');
  assert.match(await alice.page.evaluate(() => window.gw.client.url), /^wss:\/\/localhost:\d+\/ws$/);
  await B.joinGroup(alice.page, 'secure');
  await B.joinGroup(bob.page, 'secure');
  await B.typeMessage(alice.page, 'over wss://');
  await B.typeMessage(bob.page, 'received, and answered');
  for (const p of [alice, bob]) await p.page.waitForFunction(() => document.querySelectorAll('#msg-list li.msg[data-state="stored"]').length === 2);
  const a = await B.shownMessages(alice.page);
  assert.deepEqual(a, await B.shownMessages(bob.page));
  assert.deepEqual(
    a.map((m) => [m.mid, m.from, m.text]),
    [
      [1, 'alice', 'over wss://'],
      [2, 'bob', 'received, and answered'],
    ],
  );
  B.assertNoErrors(assert, alice, bob);
  await alice.context.close();
  await bob.context.close();
});

test(
  'over https: a second window of the same browser and a reload connect (WebSocket over HTTP/2)',
  async () => {
    const carol = await B.newPerson(browser, { label: 'carol', viewport: B.DESKTOP });
    const seen = [];
    carol.allow.push(/ERR_HTTP2_PROTOCOL_ERROR/);
    try {
      await B.signIn(carol, gw.origin, 'carol');
      const second = await B.newTab(carol, 'dan'); // another window, same browser profile
      for (const page of [carol.page, second.page]) page.on('console', (m) => m.type() === 'error' && seen.push(m.text()));
      const steps = [
        ['a second window', () => B.signIn(second, gw.origin, 'dan')],
        ['a reload', async () => {
          await carol.page.reload();
          await B.waitOnline(carol.page, 5000);
        }],
      ];
      for (const [what, step] of steps) {
        try {
          await step();
        } catch (e) {
          console.log(`over https, ${what} did not connect: ${seen[0] || e.message.split('\n')[0]}`);
          throw e;
        }
      }
    } finally {
      await carol.context.close();
    }
  },
);
