// Debian's chromium, driven by playwright-core (no browser is ever downloaded), and the
// steps a person takes on the demo page. Every page is watched for console errors and
// uncaught exceptions: a test fails on any it did not expect.

import { before, after } from 'node:test';
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

import { startGateway } from './gateway.js';

const here = dirname(fileURLToPath(import.meta.url));
export const SCREENSHOTS = process.env.GW_SCREENSHOTS || join(here, '..', 'screenshots');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

export const WAIT = 20000; // the bound of any one wait in these tests

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    timeout: 30000,
  });
}

/**
 * A page in a fresh browser context (its own storage: one "person"), watched for errors.
 * `allow` is a list of regexps of console errors that are expected (the browser's own
 * network errors while a test has the gateway down on purpose).
 */
export async function newPerson(browser, { viewport = DESKTOP, label = 'page' } = {}) {
  const context = await browser.newContext({ viewport, ignoreHTTPSErrors: true, deviceScaleFactor: 1 });
  context.setDefaultTimeout(WAIT);
  const page = await context.newPage();
  const person = { context, page, label, errors: [], allow: [] };
  watch(person, page);
  return person;
}

/** Another tab of the same person (same context: shared localStorage and channels). */
export async function newTab(person, label) {
  const page = await person.context.newPage();
  const tab = { context: person.context, page, label, errors: person.errors, allow: person.allow };
  watch(tab, page);
  return tab;
}

function watch(p, page) {
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const text = m.text();
    if (p.allow.some((re) => re.test(text))) return;
    p.errors.push(`${p.label}: console error: ${text}`);
  });
  page.on('pageerror', (e) => p.errors.push(`${p.label}: page error: ${e.message}`));
}

export function screenshotPath(name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return join(SCREENSHOTS, name);
}

export async function shot(page, name, opts = {}) {
  const path = screenshotPath(name);
  await page.screenshot({ path, ...opts });
  return path;
}

/** Open the page and sign in with a name, then wait until the connection is online. */
export async function signIn(person, origin, user) {
  const { page } = person;
  await page.goto(origin + '/', { waitUntil: 'load' });
  await page.fill('#signin-name', user);
  await page.click('#signin-button');
  await waitOnline(page);
}

/**
 * The two people of most tests: alice on a desktop and bob on a phone. Signed in when
 * origin is given; then both in group gid (joined in that order) when it is given.
 */
export async function aliceAndBob(browser, origin, gid) {
  const alice = await newPerson(browser, { label: 'alice', viewport: DESKTOP });
  const bob = await newPerson(browser, { label: 'bob', viewport: PHONE });
  if (origin) {
    await signIn(alice, origin, 'alice');
    await signIn(bob, origin, 'bob');
  }
  if (gid) {
    await joinGroup(alice.page, gid);
    await joinGroup(bob.page, gid);
  }
  return { alice, bob };
}

export async function waitOnline(page, timeout = WAIT) {
  await page.waitForSelector('#conn[data-state="online"]', { timeout });
}

/** Join (or create) a group through the join form; the group opens. */
export async function joinGroup(page, gid) {
  if (!(await page.isVisible('#join-gid'))) await page.click('#back'); // phone: back to the list
  await page.fill('#join-gid', gid);
  await page.click('#join-form button');
  await page.waitForSelector(`#group-list li[data-gid="${gid}"]`, { state: 'attached' });
  await page.waitForFunction((g) => document.getElementById('chat-title').textContent === g && window.gw.client.openGid === g, gid);
}

export async function openGroup(page, gid) {
  if (!(await page.isVisible('#group-list'))) await page.click('#back'); // phone: back to the list
  await page.click(`#group-list li[data-gid="${gid}"] button`);
  await page.waitForFunction((g) => window.gw.client.openGid === g, gid);
}

/** Type a message in the composer and press Enter. */
export async function typeMessage(page, text) {
  await page.fill('#composer-input', text);
  await page.press('#composer-input', 'Enter');
}

/** The messages shown: [{mid, from, text, state}] in screen order. */
export async function shownMessages(page) {
  return page.$$eval('#msg-list li.msg', (lis) =>
    lis.map((li) => ({
      mid: li.dataset.mid ? Number(li.dataset.mid) : null,
      from: li.dataset.from,
      text: li.querySelector('.body').textContent,
      state: li.dataset.state,
    })),
  );
}

export async function unreadOf(page, gid) {
  const v = await page.getAttribute(`#group-list li[data-gid="${gid}"]`, 'data-unread');
  return v === null ? null : Number(v);
}

/** The unread badge of a group in the list: its text, or null when it has none. */
export async function badgeOf(page, gid) {
  return page.evaluate((g) => {
    const b = document.querySelector(`#group-list li[data-gid="${g}"] .badge`);
    return b ? b.textContent : null;
  }, gid);
}

/** The connection pill's text. */
export async function connText(page) {
  return page.textContent('#conn-text');
}

/** The open group's header line ("12 messages · 12 loaded · 1 sending"), read into
 * numbers; and checked: what is loaded is never more than the group's messages. */
export async function chatInfo(page, assert) {
  const text = await page.textContent('#chat-info');
  const n = (what) => {
    const m = new RegExp(`(\\d+) ${what}`).exec(text);
    return m ? Number(m[1]) : 0;
  };
  const info = { text, messages: n('message'), loaded: n('loaded'), sending: n('sending'), failed: n('not sent') };
  if (assert) assert.ok(info.loaded <= info.messages, `loaded within the group's messages: "${text}"`);
  return info;
}

/** Send n messages from the page's client without typing (bulk), as fast as it goes. */
export async function sendMany(page, gid, texts) {
  await page.evaluate(
    ({ gid, texts }) => {
      for (const t of texts) window.gw.client.send(gid, t);
    },
    { gid, texts },
  );
}

/** Wait until none of this page's own messages is pending any more. */
export async function waitAllSent(page, timeout = WAIT) {
  await page.waitForFunction(() => window.gw.client.pending.size === 0, null, { timeout });
}

export async function counters(page) {
  return page.evaluate(() => JSON.parse(JSON.stringify({ out: window.gw.client.counters.out, in: window.gw.client.counters.in, duplicates: window.gw.client.counters.duplicates, connects: window.gw.client.counters.connects, ackLog: window.gw.client.ackLog, ackEvery: window.gw.client.ackEvery, ackDelayMs: window.gw.client.ackDelayMs })));
}

/** The client's view of a group, for failure messages. */
export async function clientState(page, gid) {
  return page.evaluate((gid) => {
    const c = window.gw && window.gw.client;
    if (!c) return { signedIn: false };
    const g = c.groups.get(gid);
    const v = g && g.view;
    return {
      state: c.state,
      reason: c.reason,
      open: c.openGid,
      lastMid: g && g.lastMid,
      ack: g && g.ack,
      w: v && v.w,
      held: v && v.held.size,
      fwdRid: v && v.fwdRid,
      pending: [...c.pending.values()].map((p) => ({ body: p.body, state: p.state, tries: p.tries, code: p.code })),
      out: c.counters.out,
      in: c.counters.in,
      shown: document.querySelectorAll('#msg-list li.msg').length,
    };
  }, gid);
}

/** page.waitForFunction, and on timeout the client's state in the error. */
export async function waitState(p, gid, fn, arg, timeout = WAIT) {
  try {
    await p.page.waitForFunction(fn, arg, { timeout });
  } catch (e) {
    e.message += `\n${p.label}: ${JSON.stringify(await clientState(p.page, gid).catch((x) => x.message))}`;
    throw e;
  }
}

export function assertNoErrors(assert, ...people) {
  const errors = people.flatMap((p) => p.errors);
  assert.deepEqual(errors, [], 'console errors or page errors');
}

// A test file's set-up: a fresh gateway (gwOpts as for startGateway) and one browser,
// started before its tests and stopped after them, also when one failed. ready(gw,
// browser) hands them to the file's own variables, and may do (and await) the file's
// further set-up.
export function withGatewayAndBrowser(gwOpts, ready) {
  let gw;
  let browser;
  before(async () => {
    gw = await startGateway(gwOpts);
    browser = await launch();
    await ready(gw, browser);
  });
  after(async () => {
    if (browser) await browser.close();
    if (gw) await gw.cleanup();
  });
}
