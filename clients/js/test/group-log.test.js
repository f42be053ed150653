// The per-group log (src/group-log.js): pure logic, no socket and no timers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GroupLog } from '../src/index.js';

const m = (mid) => ({ mid, from: 'u', ts: mid, body: `m${mid}` });

test('dedup by mid: a message held twice is a duplicate', () => {
  const g = new GroupLog();
  g.w = 0;
  assert.equal(g.hold(m(1)), 'held');
  assert.equal(g.hold(m(1)), 'duplicate');
  assert.equal(g.hold({ mid: 0 }), 'ignored');
  assert.equal(g.held.size, 1);
});

test('the watermark moves over contiguous mids only, and stops at a hole', () => {
  const g = new GroupLog();
  assert.equal(g.advance(), 0, 'no watermark before the first page');
  g.w = 0;
  g.hold(m(1));
  g.hold(m(2));
  g.hold(m(4));
  assert.equal(g.advance(), 2);
  assert.equal(g.w, 2, 'mid 3 is missing: 4 is held, not counted');
  g.hold(m(3));
  assert.equal(g.advance(), 2);
  assert.equal(g.w, 4);
});

test('a push below the oldest message held is ignored, a pull-before is not', () => {
  const g = new GroupLog();
  g.w = 10;
  g.hold(m(11));
  assert.equal(g.lowestShown(), 11);
  assert.equal(g.hold(m(5)), 'ignored', 'a lone old push would leave a gap');
  assert.equal(g.hold(m(10), true), 'held', 'older history, pulled in order');
  assert.equal(g.lowestShown(), 10);
});

test('acks: only the watermark, only when it moved, batched by count', () => {
  const g = new GroupLog();
  assert.equal(g.ackTarget(), 0, 'nothing to ack before the first page');
  g.w = 0;
  for (const i of [1, 2, 3]) g.hold(m(i));
  const n = g.advance();
  assert.equal(g.countUnacked(n, 1000), true, 'the first unacked: start the delay timer');
  assert.equal(g.firstUnackedAt, 1000);
  assert.equal(g.ackDueByCount(3), true);
  assert.equal(g.ackDueByCount(4), false);
  assert.equal(g.ackTarget(), 3);
  g.acked(3);
  assert.equal(g.ackTarget(), 0, 'nothing new since');
  assert.equal(g.unacked, 0);
  g.hold(m(5));
  g.advance();
  assert.equal(g.ackTarget(), 0, 'a mid beyond a hole is never acked');
  assert.equal(g.countUnacked(1, 2000), true);
  assert.equal(g.countUnacked(1, 3000), false, 'not the first: the timer runs already');
  assert.equal(g.firstUnackedAt, 2000);
});

test('trim keeps the newest messages and says older ones exist', () => {
  const g = new GroupLog();
  g.w = 0;
  for (let i = 1; i <= 10; i++) g.hold(m(i));
  g.advance();
  g.trim(4);
  assert.deepEqual([...g.held.keys()].sort((a, b) => a - b), [7, 8, 9, 10]);
  assert.equal(g.lowestShown(), 7);
  assert.equal(g.hasOlder, true);
});

test('update: a held message is replaced by a later version only', () => {
  const g = new GroupLog();
  g.w = 0;
  g.hold(m(1));
  assert.equal(g.update({ mid: 1, from: 'u', ts: 1, ver: 2, body: 'v2' }), true);
  assert.equal(g.update({ mid: 1, from: 'u', ts: 1, ver: 1, body: 'v1' }), false, 'an older version came late');
  assert.equal(g.update({ mid: 1, from: 'u', ts: 1, ver: 2, body: 'v2 again' }), false, 'the same version');
  assert.equal(g.held.get(1).body, 'v2');
  assert.equal(g.update({ mid: 1, from: 'u', ts: 1, ver: 3, recalled: true }), true, 'a recall: a tombstone');
  assert.deepEqual(g.held.get(1), { mid: 1, from: 'u', ts: 1, ver: 3, recalled: true });
  assert.equal(g.update({ mid: 2, from: 'u', ts: 2, ver: 1, body: 'x' }), false, 'not held: not added');
  assert.equal(g.held.has(2), false);
  assert.equal(g.advance(), 1);
});

test('the horizon: the watermark steps over deleted mids, older history stops at it', () => {
  const g = new GroupLog();
  assert.deepEqual(g.horizon(16), []);
  assert.equal(g.w, null, 'no watermark before the first page: nothing to move');
  assert.equal(g.olderGone(), false, 'nothing shown yet');
  g.w = 0; // a view left at 5; messages 6..15 were deleted since
  for (const i of [1, 2, 3, 4, 5]) g.hold(m(i));
  g.advance();
  g.firstUnread = 3;
  assert.equal(g.horizon(16), null, 'the same horizon again');
  g.firstMid = 1;
  assert.deepEqual(g.horizon(16).sort((a, b) => a - b), [1, 2, 3, 4, 5], 'held from before the gap: dropped');
  assert.equal(g.w, 15, 'mids below the horizon never come: not waited for');
  assert.equal(g.firstUnread, 16);
  assert.equal(g.held.size, 0);
  for (const i of [16, 17, 18]) g.hold(m(i));
  assert.equal(g.advance(), 3);
  assert.equal(g.w, 18);
  assert.equal(g.ackTarget(), 18, 'acked up to the last mid held');
  assert.equal(g.lowestShown(), 16);
  assert.equal(g.olderExists(), false, 'no older history past the horizon');
  assert.equal(g.olderGone(), true, 'older messages were deleted');
  assert.equal(g.horizon(10), null, 'a horizon never moves down');
  assert.equal(g.firstMid, 16);
  assert.equal(g.w, 18);
});

test('the horizon: olderGone only when messages before the lowest shown were deleted', () => {
  const g = new GroupLog();
  g.w = 0;
  for (let i = 1; i <= 20; i++) g.hold(m(i));
  g.advance();
  assert.deepEqual(g.horizon(16), [], 'held before they were deleted, no gap: still shown from mid 1');
  assert.equal(g.olderGone(), false, 'mid 1 is shown: the start of the group');
  assert.equal(g.w, 20);
  g.trim(8); // 13..20 kept, 13..15 below the horizon: nothing older can come back
  assert.equal(g.lowestShown(), 13);
  assert.equal(g.hasOlder, false);
  assert.equal(g.olderGone(), true);
  const h = new GroupLog();
  h.w = 30;
  h.hold(m(31));
  h.horizon(20);
  assert.equal(h.olderExists(), true, '20..30 are still kept');
  assert.equal(h.olderGone(), false);
});
