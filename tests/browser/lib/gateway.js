// Starts the real gateway (build/gw) for a browser test: a free port on 127.0.0.1, a
// temporary data folder, demo mode, and the page from web-demo/. Every gateway started
// here is stopped when the test process ends, also when a test fails or the process is
// interrupted.
//
// Transport: https:// and wss:// with the self-signed certificate the gateway makes in
// its data folder, as a real user gets from tools/run.sh; GW_TEST_TLS=0 switches to
// plain http:// and ws:// (--insecure) for debugging with a packet capture.

import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { openSync, closeSync, readFileSync, existsSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, '../../..');
export const GW_BIN = process.env.GW_BIN || join(ROOT, 'build/gw');
export const WEB_ROOT = join(ROOT, 'web-demo');

const live = new Set(); // child processes to kill if the test process goes away

function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    killAll();
    process.exit(130);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wait for fn() to be truthy, polling; throws after timeoutMs with `what`. */
export async function waitFor(fn, { timeoutMs = 10000, intervalMs = 50, what = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(intervalMs);
  }
}

export class Gateway {
  constructor({ tls = process.env.GW_TEST_TLS !== '0', extraArgs = [] } = {}) {
    this.tls = tls;
    this.extraArgs = extraArgs;
    this.child = null;
    this.port = 0;
    this.dir = null;
    this.exited = null;
  }

  get origin() {
    return `${this.tls ? 'https' : 'http'}://localhost:${this.port}`;
  }

  async start() {
    if (!existsSync(GW_BIN)) throw new Error(`${GW_BIN} is missing: build it first (tools/setup.sh)`);
    if (!this.dir) this.dir = await mkdtemp(join(process.env.TMPDIR || tmpdir(), 'gw-browser-'));
    await this.spawn(this.port);
    return this;
  }

  async spawn(port) {
    const portFile = join(this.dir, `port-${Date.now()}`);
    const args = ['--listen', '127.0.0.1', '--port', String(port), '--port-file', portFile, '--data', join(this.dir, 'data'), '--demo', '--web-root', WEB_ROOT, ...this.extraArgs];
    if (!this.tls) args.push('--insecure');
    const log = openSync(join(this.dir, 'gw.log'), 'a');
    const child = spawn(GW_BIN, args, { stdio: ['ignore', log, log], env: { ...process.env, GW_SECRET: 'browser-test-secret-0123456789abcdef' } });
    closeSync(log);
    this.child = child;
    live.add(child);
    this.exited = new Promise((res) =>
      child.once('exit', (code, signal) => {
        live.delete(child);
        res({ code, signal });
      }),
    );
    let dead = null;
    this.exited.then((x) => (dead = x));
    await waitFor(
      async () => {
        if (dead) throw new Error(`gw exited at start (${JSON.stringify(dead)}); log:\n${this.logTail()}`);
        if (!existsSync(portFile)) return false;
        const p = parseInt(readFileSync(portFile, 'utf8'), 10);
        if (!p) return false;
        this.port = p;
        const r = await this.get('/healthz');
        return r.status === 200;
      },
      { timeoutMs: 15000, what: 'the gateway to listen' },
    );
  }

  logTail(lines = 40) {
    try {
      return readFileSync(join(this.dir, 'gw.log'), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** A request to the gateway from node (the certificate is the gateway's own
   * self-signed one): its status and body (text). */
  request(method, path, { headers = {}, body = '' } = {}) {
    const mod = this.tls ? https : http;
    return new Promise((res, rej) => {
      const req = mod.request({ host: '127.0.0.1', port: this.port, path, method, rejectUnauthorized: false, servername: 'localhost', headers, timeout: 5000 }, (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (c) => (text += c));
        r.on('end', () => res({ status: r.statusCode, body: text }));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', rej);
      req.end(body);
    });
  }

  get(path) {
    return this.request('GET', path);
  }

  async stats() {
    const r = await this.get('/stats');
    if (r.status !== 200) throw new Error(`/stats: HTTP ${r.status}`);
    return JSON.parse(r.body);
  }

  /** Graceful stop (SIGTERM), then SIGKILL if it takes too long. */
  async stop() {
    const child = this.child;
    if (!child || !live.has(child)) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 8000);
    await this.exited;
    clearTimeout(t);
  }

  /** A crash: SIGKILL, nothing flushed. */
  async kill() {
    const child = this.child;
    if (!child || !live.has(child)) return;
    child.kill('SIGKILL');
    await this.exited;
  }

  /** Start again on the same port and data folder. */
  async restart() {
    await this.spawn(this.port);
  }

  async cleanup() {
    await this.stop();
    if (this.dir && !process.env.GW_KEEP_TMP) await rm(this.dir, { recursive: true, force: true });
  }
}

export async function startGateway(opts) {
  return new Gateway(opts).start();
}

export { readFile };
