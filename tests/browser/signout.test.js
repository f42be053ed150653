// Revocation as a person sees it: the application signs a user out with the server API
// (DELETE /api/v1/users/ID/sessions); the gateway closes the page's session with 4003, and
// the demo page goes back to its sign-in form and says why, instead of signing in again
// with the token it had (which the gateway now refuses anyway: docs/API.md, Revoking a
// user). Signing in again gets a new token, issued after the sign-out, which works.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as B from './lib/browser.js';

const KEY = 'browser-test-api-key-0123456789';
const keyDir = mkdtempSync(join(tmpdir(), 'gw-signout-'));
writeFileSync(join(keyDir, 'api-key'), KEY + '\n');

let gw;
let alice;

B.withGatewayAndBrowser({ extraArgs: ['--api-key-file', join(keyDir, 'api-key')] }, async (g, browser) => {
  gw = g;
  alice = await B.newPerson(browser, { label: 'alice', viewport: B.DESKTOP });
});

/** DELETE on the server API, from node. */
function apiDelete(path) {
  return gw.request('DELETE', path, { headers: { Authorization: `Bearer ${KEY}` } });
}

test('signed out by the application: the page goes back to sign-in and says so', async () => {
  const { page } = alice;
  await B.signIn(alice, gw.origin, 'alice');
  await B.joinGroup(page, 'lobby');
  const r = await apiDelete('/api/v1/users/alice/sessions');
  assert.equal(r.status, 200, `sign-out: ${r.status} ${r.body}`);
  await page.waitForSelector('#signin-name', { state: 'visible', timeout: B.WAIT });
  await page.waitForFunction(() => /signed out/.test(document.getElementById('signin-error').textContent), null, { timeout: B.WAIT });
  const said = await page.textContent('#signin-error');
  assert.match(said, /sign in again/i, `what the page says: ${said}`);
  // It stays signed out: no session comes back by itself.
  await page.waitForTimeout(1500);
  const stats = await gw.stats();
  assert.equal(stats.connections.now, 0, 'no session reconnected with the spent token');
  // Signing in again gets a new token, issued after the sign-out: it works.
  await page.fill('#signin-name', 'alice');
  await page.click('#signin-button');
  await B.waitOnline(page);
  B.assertNoErrors(assert, alice);
});
