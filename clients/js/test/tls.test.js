// The client over wss:// against the real gateway with its own self-signed certificate
// (build/gw without --insecure and without --cert makes one in DATA/tls on first start),
// with node's `ws` as the WebSocket. Not trusted: each attempt is reported offline with
// reason 'tls' and the certificate error's text, and retried; trusted (the `ca` option of
// `ws`, through a subclass as WebSocketImpl): online, the same client included once its
// trust is fixed. GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { GwClient } from '../src/index.js';
import { build, until, startGateway } from './fixture.js';


const gw = startGateway('gw-js-tls-', [], { tls: true });
const { dir, data } = gw;
const clients = []; // stopped at the end whatever happened: a failed test must not keep retrying
after(() => {
  for (const c of clients) c.stop();
  gw.stop();
});

const url = () => gw.url();

const token = (uid) => gw.token(uid);

/** A client whose sockets trust what trust.ca holds (nothing: node's default roots). */
function client(address, trust) {
  class TrustingWebSocket extends WebSocket {
    constructor(u, p) {
      super(u, p, trust.ca ? { ca: trust.ca } : {});
    }
  }
  const c = new GwClient({ url: address, getToken: async () => token('alice'), WebSocketImpl: TrustingWebSocket });
  c.states = [];
  clients.push(c);
  c.addEventListener('state', (e) => c.states.push(e.detail));
  return c;
}

test("a certificate not trusted: offline with reason 'tls' and its error, at each attempt; online once trusted", async () => {
  const address = await url();
  const cert = readFileSync(join(data, 'tls', 'cert.pem'));
  const trust = { ca: null };
  const c = client(address, trust);
  c.start();
  const tls = () => c.states.filter((d) => d.state === 'offline' && d.reason === 'tls');
  await until('two attempts refused for TLS', () => tls().length >= 2);
  assert.equal(c.state !== 'online', true);
  for (const d of tls()) {
    assert.match(d.error, /certificate/, d.error);
    assert.match(d.error, /\(DEPTH_ZERO_SELF_SIGNED_CERT\)$/, d.error);
    assert.ok(d.retryAt > Date.now() - 5000, 'a retry is scheduled');
  }
  assert.deepEqual(tls().map((d) => d.attempt).slice(0, 2), [1, 2], 'the backoff climbs');
  assert.equal(c.states.filter((d) => d.reason === 'connection lost').length, 0, 'never reported as a lost connection');
  assert.equal(c.reason === 'tls' || c.state === 'connecting', true);

  // The user trusts the certificate: the next retry (same client, no restart) connects.
  trust.ca = cert;
  await until('online once trusted', () => c.state === 'online', 15000);
  assert.deepEqual([c.uid, c.reason, c.error], ['alice', '', undefined]);
  assert.equal(c.states.at(-1).error, undefined);
  c.stop();

  // A fresh client trusting it from the start: online at the first attempt.
  const trusted = client(address, { ca: cert });
  trusted.start();
  await until('the trusting client online', () => trusted.state === 'online');
  assert.deepEqual(trusted.states.map((d) => d.state), ['connecting', 'online']);
  trusted.stop();
});

test('wss:// to a plain ws:// port: a TLS failure too (the handshake)', async () => {
  // gw --insecure serves ws:// only: the TLS handshake fails (node 20: EPROTO, with
  // OpenSSL's "wrong version number" in its message).
  const plain = join(dir, 'plain');
  mkdirSync(plain);
  const gw2 = spawn(join(build, 'gw'), ['--insecure', '--listen', '127.0.0.1', '--port', '0',
    '--port-file', join(plain, 'port'), '--data', join(plain, 'data')], { stdio: 'ignore' });
  try {
    await until('the plain gateway to listen', () => existsSync(join(plain, 'port')) && readFileSync(join(plain, 'port'), 'utf8').trim());
    const c = client(`wss://127.0.0.1:${readFileSync(join(plain, 'port'), 'utf8').trim()}/ws`, { ca: null });
    c.start();
    await until('an offline state', () => c.states.some((d) => d.state === 'offline'));
    c.stop();
    const d = c.states.find((x) => x.state === 'offline');
    assert.equal(d.reason, 'tls', JSON.stringify(d));
    assert.match(d.error, /^TLS handshake failed: .+ \(EPROTO\)$|\(ERR_SSL_[A-Z_]+\)$/, d.error);
  } finally {
    gw2.kill('SIGTERM');
  }
});
