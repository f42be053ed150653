// The package against the real gateway: build/gw on 127.0.0.1 (a free port, a fresh data
// folder), tokens from build/tools/gw_token, and node's `ws` as the WebSocket. Two users:
// a message sent while one is away is pulled, exactly once, when that one comes back and
// opens the group, and its ack is stored (the next sign-in shows nothing unread).
// GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const build = process.env.GW_BUILD || join(here, '..', '..', '..', 'build');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'gw-js-'));
const gw = spawn(join(build, 'gw'), ['--insecure', '--listen', '127.0.0.1', '--port', '0',
  '--port-file', join(dir, 'port'), '--data', join(dir, 'data')], { stdio: 'ignore' });
after(() => {
  gw.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

async function url() {
  await until('the gateway to listen', () => existsSync(join(dir, 'port')) && readFileSync(join(dir, 'port'), 'utf8').trim());
  return `ws://127.0.0.1:${readFileSync(join(dir, 'port'), 'utf8').trim()}/ws`;
}

function token(uid) {
  return execFileSync(join(build, 'tools', 'gw_token'), ['--user', uid, '--secret-file', join(dir, 'data', 'token-secret')]).toString().trim();
}

async function signIn(uid) {
  const c = new GwClient({ url: await url(), getToken: async () => token(uid), WebSocketImpl: WebSocket });
  c.start();
  await until(`${uid} online`, () => c.state === 'online');
  return c;
}

const group = (c, gid) => c.groupList().find((g) => g.gid === gid);
const bodies = (c, gid) => c.viewEntries(gid).filter((e) => e.mid).map((e) => e.text);

test('a message sent while a member is away is pulled once when it opens the group, and acked', async () => {
  const alice = await signIn('alice');
  let bob = await signIn('bob');
  alice.join('room');
  bob.join('room');
  await until('both joined', () => group(alice, 'room') && group(bob, 'room'));
  bob.stop(); // bob goes away

  alice.open('room');
  for (const text of ['one', 'two', 'three']) alice.send('room', text);
  await until('alice sent three', () => alice.pending.size === 0 && bodies(alice, 'room').length === 3);

  bob = await signIn('bob');
  assert.equal(group(bob, 'room').unread, 3, 'the welcome counts what bob missed');
  bob.open('room'); // enter: a page after his stored ack
  await until('bob holds three', () => bodies(bob, 'room').length === 3);
  assert.deepEqual(bodies(bob, 'room'), ['one', 'two', 'three']);
  alice.send('room', 'four'); // live, while bob has the group open
  await until('bob holds four', () => bodies(bob, 'room').length === 4);
  assert.deepEqual(bodies(bob, 'room'), ['one', 'two', 'three', 'four'], 'each once, in order');
  bob.close(); // leaving the view acks it
  await sleep(500); // the gateway persists acks every 200 ms
  bob.stop();

  const again = await signIn('bob');
  assert.equal(group(again, 'room').unread, 0, 'the ack was stored');
  again.stop();
  alice.stop();
});

test("the README's embedding example runs as printed", async () => {
  const readme = readFileSync(join(here, '..', '..', '..', 'README.md'), 'utf8');
  const block = readme.split('<!-- example: gw-client')[1].split('<!-- end of example -->')[0];
  const code = block.split('```js\n')[1].split('```')[0];
  const file = join(here, '.readme-example.mjs'); // in the package: 'gw-client' resolves
  writeFileSync(file, code);
  try {
    const out = execFileSync(process.execPath, [file], {
      env: { ...process.env, GW_URL: await url(), GW_TOKEN: token('carol') },
      timeout: 20000,
    }).toString();
    assert.equal(out, '#1 carol: hello from my app\n');
  } finally {
    rmSync(file, { force: true });
  }
});
