// The package as an app gets it, following README.md ("The JavaScript client package"):
// in a fresh folder outside the repository, `npm init -y`, then the README's install
// command as printed (npm pack of clients/js, the tarball installed with `ws`; only its
// /tmp is this test's own folder), then the README's example app run against the real
// build/gw over wss://, trusting the gateway's self-signed certificate through
// NODE_EXTRA_CA_CERTS. The install must be a copy (no link back into the repository).
// GW_BUILD names the build folder (default: ../../build from this package).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync, lstatSync, realpathSync, readdirSync } from 'node:fs';
import { join, relative, isAbsolute } from 'node:path';
import { build, repo, until, startGateway } from './fixture.js';


const gw = startGateway('gw-js-pkg-', [], { tls: true });
const { dir, data } = gw;
after(() => {
  gw.stop();
});

const inside = (parent, p) => {
  const r = relative(realpathSync(parent), realpathSync(p));
  return r === '' || (!r.startsWith('..') && !isAbsolute(r));
};

/** Runs a command, its output returned; fails the test with its output otherwise. */
function run(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (b) => (out += b));
    p.stderr.on('data', (b) => (err += b));
    const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeout);
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')}: ${signal || 'exit ' + code}\n${out}\n${err}`));
    });
  });
}

test("the README's install command, then its example app, in a folder outside the repository", async () => {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const install = readme.split('<!-- install: gw-client')[1].split('```sh\n')[1].split('```')[0].trim();
  assert.match(install, /^npm install .*npm pack .* ws$/, install);
  const example = readme.split('<!-- example: file app.mjs')[1].split('<!-- end of example -->')[0].split('```js\n')[1].split('```')[0];

  const app = join(dir, 'app');
  const packs = join(dir, 'packs'); // the README's /tmp
  for (const d of [app, packs]) execFileSync('mkdir', ['-p', d]);
  assert.ok(!inside(repo, app), `${app} is outside the repository`);
  const npmEnv = { ...process.env, GW_HOME: realpathSync(repo), npm_config_audit: 'false', npm_config_fund: 'false',
    npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' };
  await run('npm', ['init', '-y'], { cwd: app, env: npmEnv, timeout: 20000 });
  await run('bash', ['-euc', install.replaceAll('/tmp', packs)], { cwd: app, env: npmEnv, timeout: 60000 });

  // The tarball: src/ with its declarations, package.json and the README; nothing of the tests.
  const tarballs = readdirSync(packs);
  assert.equal(tarballs.length, 1, tarballs.join(' '));
  assert.match(tarballs[0], /^gw-client-\d+\.\d+\.\d+\.tgz$/);
  const files = execFileSync('tar', ['tzf', join(packs, tarballs[0])]).toString().trim().split('\n').sort();
  assert.ok(files.includes('package/src/index.d.ts') && files.includes('package/src/index.js') && files.includes('package/package.json') && files.includes('package/README.md'), files.join(' '));
  assert.deepEqual(files.filter((f) => !f.startsWith('package/src/') && f !== 'package/package.json' && f !== 'package/README.md'), [], 'only src/, package.json and README.md');
  assert.deepEqual(files.filter((f) => /test/.test(f)), []);

  // Installed as a copy, with its dependency, and nothing pointing back at the checkout.
  const mod = join(app, 'node_modules', 'gw-client');
  assert.ok(lstatSync(mod).isDirectory() && !lstatSync(mod).isSymbolicLink(), 'node_modules/gw-client is a real directory');
  assert.ok(!inside(repo, mod));
  assert.ok(existsSync(join(mod, 'src', 'index.d.ts')));
  assert.ok(!existsSync(join(mod, 'test')) && !existsSync(join(mod, 'node_modules')));
  for (const dep of ['@msgpack/msgpack', 'ws']) {
    const p = join(app, 'node_modules', dep);
    assert.ok(lstatSync(p).isDirectory() && !lstatSync(p).isSymbolicLink(), `${dep} installed in the app`);
  }
  const deps = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).dependencies;
  assert.match(deps['gw-client'], /^file:.*gw-client-.*\.tgz$/, 'the tarball, not the folder');
  assert.ok(deps.ws);

  // The README's example, run as its next line says: GW_URL, GW_TOKEN, and the gateway's
  // certificate trusted through NODE_EXTRA_CA_CERTS (here its self-signed one is the anchor).
  writeFileSync(join(app, 'app.mjs'), example);
  await until('the gateway to listen', () => existsSync(join(dir, 'port')) && readFileSync(join(dir, 'port'), 'utf8').trim());
  const port = readFileSync(join(dir, 'port'), 'utf8').trim();
  const token = gw.token('alice');
  const env = { ...process.env, GW_URL: `wss://localhost:${port}/ws`, GW_TOKEN: token, NODE_EXTRA_CA_CERTS: join(data, 'tls', 'cert.pem') };
  delete env.NODE_OPTIONS; // the test runner's own
  const out = await run(process.execPath, ['app.mjs'], { cwd: app, env, timeout: 20000 });
  assert.equal(out, '#1 alice: hello from my app\n');
});
