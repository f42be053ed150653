// The connection's rules (src/connection.js): the ping after quiet, the pong deadline; which
// errors are TLS failures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Pinger, tlsFailure } from '../src/connection.js';

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

test('TLS failures: certificate refusals and failed handshakes, with their text; nothing else', () => {
  const err = (code, message) => Object.assign(new Error(message), { code });
  assert.equal(tlsFailure(err('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate')), 'self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)');
  assert.equal(tlsFailure(err('SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain')), 'self-signed certificate in certificate chain (SELF_SIGNED_CERT_IN_CHAIN)');
  assert.equal(tlsFailure(err('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate')), 'unable to verify the first certificate (UNABLE_TO_VERIFY_LEAF_SIGNATURE)');
  assert.equal(tlsFailure(err('CERT_HAS_EXPIRED', 'certificate has expired')), 'certificate has expired (CERT_HAS_EXPIRED)');
  assert.equal(tlsFailure(err('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames")), "Hostname/IP does not match certificate's altnames (ERR_TLS_CERT_ALTNAME_INVALID)");
  assert.equal(tlsFailure(err('ERR_SSL_WRONG_VERSION_NUMBER', 'wrong version number')), 'wrong version number (ERR_SSL_WRONG_VERSION_NUMBER)');
  assert.equal(tlsFailure(err('CERT_REVOKED', '')), 'CERT_REVOKED', 'no message: the code');
  // wss:// to a plain port, as node 20 reports it: OpenSSL's reason out of the message.
  assert.equal(
    tlsFailure(err('EPROTO', 'write EPROTO 80BCA795287F0000:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:\n')),
    'TLS handshake failed: wrong version number (EPROTO)',
  );
  assert.equal(tlsFailure(err('EPROTO', 'write EPROTO')), null, 'an EPROTO that is not from TLS');
  for (const other of [err('ECONNREFUSED', 'connect ECONNREFUSED'), err('ECONNRESET', 'socket hang up'), new Error('Unexpected server response: 404'), undefined, null, 'DEPTH_ZERO_SELF_SIGNED_CERT', { code: 42 }]) {
    assert.equal(tlsFailure(other), null, String(other && other.code));
  }
});
