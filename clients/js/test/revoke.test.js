// Revocation (docs/API.md, Revoking a user) as the package honours it, against the real
// build/gw: a session signed out by the application (4003) asks getToken for a new token
// with refresh: true and never says hello with the old one again; given the same one, it
// stops; and a Node application whose client is stopped so exits by itself.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';
import { sleep, until, startGateway } from './fixture.js';

const KEY = 'js-revoke-api-key-0123456789';
const keyDir = mkdtempSync(join(tmpdir(), 'gw-js-key-'));
const keyFile = join(keyDir, 'keys');
writeFileSync(keyFile, `${KEY}\n`);
const gw = startGateway('gw-js-revoke-', ['--api-key-file', keyFile]);
after(() => {
  gw.stop();
  rmSync(keyDir, { recursive: true, force: true });
});

/** DELETE /api/v1/users/{uid}/sessions: the user's sessions end, its tokens are revoked. */
async function signOut(uid) {
  const http = (await gw.url()).replace(/^ws/, 'http').replace(/\/ws$/, '');
  const res = await fetch(`${http}/api/v1/users/${uid}/sessions`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${KEY}` },
  });
  assert.equal(res.status, 200, await res.text());
}

/** A token minted after the current second: iat is in seconds, and a token of the
 * sign-out's own second is refused. */
async function freshToken(uid) {
  const second = Math.floor(Date.now() / 1000);
  while (Math.floor(Date.now() / 1000) === second) await sleep(20);
  return gw.token(uid);
}

function client(getToken) {
  return gw.url().then((url) => new GwClient({ url, getToken, WebSocketImpl: WebSocket }));
}

test('signed out (4003): getToken is asked with refresh: true and the new token signs in', async () => {
  await gw.url(); // the gateway listens: its secret is written
  const asked = [];
  const first = gw.token('ivy');
  let second = null;
  const c = await client(async ({ refresh }) => {
    asked.push(refresh);
    if (!refresh) return first;
    second = await freshToken('ivy');
    return second;
  });
  const states = [];
  c.addEventListener('state', (ev) => states.push(`${ev.detail.state} ${ev.detail.reason}`));
  c.start();
  await until('ivy online', () => c.state === 'online');
  await signOut('ivy');
  await until('ivy offline', () => c.state !== 'online');
  await until('ivy online again', () => c.state === 'online' && c.counters.connects === 2);
  assert.deepEqual(asked, [false, true]);
  assert.notEqual(second, first);
  assert.equal(c.token, second, 'the hello said the new token');
  assert.ok(states.includes('offline signed out by the application'), states.join(', '));
  c.stop();
});

test('signed out (4003) and given the same token: the client stops and never says it again', async () => {
  await gw.url();
  const tok = gw.token('jay');
  const asked = [];
  const c = await client(async ({ refresh }) => {
    asked.push(refresh);
    return tok;
  });
  let auth = null;
  c.addEventListener('auth', (ev) => (auth = ev.detail));
  c.start();
  await until('jay online', () => c.state === 'online');
  await signOut('jay');
  await until('jay stopped', () => c.state === 'stopped');
  assert.deepEqual(asked, [false, true]);
  assert.equal(c.counters.connects, 1, 'no second hello with the spent token');
  assert.deepEqual(auth, { reason: 'signed out by the application' });
  assert.equal(c.channel, null, 'the tab channel is closed');
  c.stop();
});

test('a Node application whose token is revoked reports stopped and exits by itself', async () => {
  const app = join(dirname(fileURLToPath(import.meta.url)), 'revoked-app.js');
  const child = spawn(process.execPath, [app], {
    env: { ...process.env, GW_APP_URL: await gw.url(), GW_APP_TOKEN: gw.token('kim') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  await until('the app online', () => out.includes('online'), 10000);
  await signOut('kim');
  const code = await Promise.race([exited, sleep(20000).then(() => 'still running')]);
  if (code === 'still running') child.kill('SIGKILL');
  assert.equal(code, 0, `the app did not exit by itself within 20 s; it said:\n${out}`);
  assert.match(out, /stopped signed out by the application/);
});
