// The TypeScript declarations (src/index.d.ts) compile, strictly, with a program that
// uses the public API as an application would (test/types-use.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

test('the declarations compile with tsc --strict against a program that uses them', () => {
  const r = spawnSync(join(root, 'node_modules', '.bin', 'tsc'),
    ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--lib', 'es2022,dom', join(root, 'test', 'types-use.ts')], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
