// What the tests against the real gateway share: build/gw on 127.0.0.1 at a free port
// with a fresh data folder, tokens from build/tools/gw_token, waiting for a condition, and
// clients joining a group.
// (Node's test runner loads this file too, as everything under test/: it has no tests.)
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = join(here, '..', '..', '..');
export const build = process.env.GW_BUILD || join(repo, 'build');
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** c's entry for gid in its list of groups (undefined: not a member). */
export const group = (c, gid) => c.groupList().find((g) => g.gid === gid);

/** Waits until cond() is true, polling every 20 ms; throws after ms naming what. */
export async function until(what, cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Each of clients joins gid; resolves once every one has it in its list of groups. */
export async function joinAll(gid, ...clients) {
  for (const c of clients) c.join(gid);
  await until(`all joined ${gid}`, () => clients.every((c) => group(c, gid)));
}

/**
 * Starts build/gw in a temporary folder named from prefix, with args added: plain ws://
 * unless tls (then its own self-signed certificate, DATA/tls/cert.pem). The caller stops
 * it with stop() (in its after()).
 */
export function startGateway(prefix, args = [], { tls = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const data = join(dir, 'data');
  const portFile = join(dir, 'port');
  const proc = spawn(join(build, 'gw'), [...(tls ? [] : ['--insecure']), '--listen', '127.0.0.1',
    '--port', '0', '--port-file', portFile, '--data', data, ...args], { stdio: 'ignore' });
  const port = () => existsSync(portFile) && readFileSync(portFile, 'utf8').trim();
  return {
    dir,
    data,
    proc,
    /** The WebSocket URL, once the gateway listens. */
    async url() {
      await until('the gateway to listen', port);
      return `${tls ? 'wss' : 'ws'}://127.0.0.1:${port()}/ws`;
    },
    /** A token for uid, signed with the gateway's secret. */
    token(uid) {
      return execFileSync(join(build, 'tools', 'gw_token'),
        ['--user', uid, '--secret-file', join(data, 'token-secret')]).toString().trim();
    },
    stop() {
      proc.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
