// The connection's rules (src/connection.js): the ping after quiet, the pong deadline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Pinger } from '../src/connection.js';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('a ping after quiet, and dead when nothing answers it', async () => {
  let pings = 0;
  let dead = 0;
  const p = new Pinger({ ping: () => ++pings > 0, dead: () => dead++, idleMs: 20, pongMs: 30 });
  p.arm();
  await sleep(35);
  assert.equal(pings, 1);
  assert.equal(dead, 0, 'the pong deadline is not over yet');
  await sleep(40);
  assert.equal(dead, 1);
  p.stop();
});

test('anything heard after the ping keeps the connection; arming again postpones the ping', async () => {
  let pings = 0;
  let dead = 0;
  const p = new Pinger({ ping: () => ++pings > 0, dead: () => dead++, idleMs: 20, pongMs: 30 });
  p.arm();
  await sleep(10);
  p.arm(); // a frame came: the quiet starts again
  await sleep(15);
  assert.equal(pings, 0);
  await sleep(15);
  assert.equal(pings, 1);
  p.heard();
  await sleep(40);
  assert.equal(dead, 0);
  p.stop();
});

test('no ping is sent while it cannot be, and then no deadline runs', async () => {
  let dead = 0;
  const p = new Pinger({ ping: () => false, dead: () => dead++, idleMs: 10, pongMs: 10 });
  p.arm();
  await sleep(40);
  assert.equal(dead, 0);
  p.stop();
});
