import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshotPath } from './support/browser';
import { PEPPER_V1 } from './support/guests';
import { startTestServer, type TestServer } from './support/server';

/**
 * Two browser contexts in one Chromium play the demo arena against each
 * other through /play: one signs up with a password, one plays as a guest;
 * they queue, see each other move, chat, and both see the result. Needs the
 * page built (`npm run build`, which `npm test` runs first).
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let s: TestServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  s = await startTestServer(
    { guest_auth: true, guest_verifier_pepper: PEPPER_V1, matchmaker_tick_ms: 100 },
    { gameDir: path.join(root, 'examples', 'demo-game') },
  );
  browser = await launchChromium();
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await s?.close();
});

/** A fresh browser profile on /play, with every page error and console error collected. */
async function player(): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
  page.on('console', (message) => {
    // Refused requests are recorded with their address below.
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.status()} ${response.request().method()} ${new URL(response.url()).pathname}`);
  });
  const response = await page.goto(`${s.url}/play`);
  expect(response?.status(), 'GET /play answered no page: run npm run build first').toBe(200);
  return { page, problems };
}

const board = (page: Page) => page.locator('#board');

/** The page's own record of the board (data attributes the page sets from each match.state). */
async function positions(page: Page): Promise<{ you: string; them: string; coin: string }> {
  return board(page).evaluate((el: HTMLElement) => ({ you: el.dataset.you ?? '', them: el.dataset.them ?? '', coin: el.dataset.coin ?? '' }));
}

describe('/play in Chromium', () => {
  it('two players sign up, queue, see each other move, chat, and see the result', async () => {
    const alice = await player();
    const guest = await player();
    const name = `alice_${process.pid}_${Math.random().toString(36).slice(2, 6)}`;

    // One signs up with a password, the other plays as a guest.
    await alice.page.fill('#username', name);
    await alice.page.fill('#password', 'correct horse battery');
    await alice.page.click('#sign-up');
    await guest.page.click('#guest');
    for (const p of [alice, guest]) {
      await p.page.locator('#lobby').waitFor({ state: 'visible' });
      await expect.poll(() => p.page.getAttribute('#connection', 'data-status')).toBe('connected');
    }
    expect(await alice.page.textContent('#who')).toBe(name);

    // Both queue; the matchmaker pairs them and the arena shows on both pages.
    await alice.page.click('#queue');
    await alice.page.locator('#cancel').waitFor({ state: 'visible' });
    expect(await alice.page.textContent('#lobby-status')).toContain('Waiting');
    await guest.page.click('#queue');
    for (const p of [alice, guest]) {
      await p.page.locator('#arena').waitFor({ state: 'visible' });
      await p.page.waitForFunction(() => document.getElementById('board')!.dataset.tick !== undefined);
    }
    await expect.poll(() => guest.page.textContent('#them-name')).toBe(name);

    // Alice steps with the keyboard; the guest's page sees her move.
    const before = await positions(alice.page);
    const [x] = before.you.split(',').map(Number);
    const key = x! < 19 ? 'ArrowRight' : 'ArrowLeft';
    const expected = `${x! + (key === 'ArrowRight' ? 1 : -1)},${before.you.split(',')[1]}`;
    expect((await positions(guest.page)).them).toBe(before.you);
    await alice.page.locator('#board').click();
    await alice.page.keyboard.press(key);
    await expect.poll(async () => (await positions(guest.page)).them).toBe(expected);
    await expect.poll(async () => (await positions(alice.page)).you).toBe(expected);

    // They chat over the match's channel.
    await alice.page.fill('#chat-input', 'good luck!');
    await alice.page.press('#chat-input', 'Enter');
    await expect.poll(() => guest.page.locator('#chat-log .from-them').allTextContents()).toEqual([`${name}: good luck!`]);
    await guest.page.fill('#chat-input', 'you too');
    await guest.page.click('#chat-form button');
    await expect.poll(() => alice.page.locator('#chat-log .from-them').allTextContents()).toEqual([expect.stringMatching(/: you too$/)]);
    await expect.poll(() => alice.page.locator('#chat-log .from-you').allTextContents()).toEqual([`${name}: good luck!`]);

    // Both let their players walk to the coin until someone has five.
    await alice.page.check('#auto');
    await guest.page.check('#auto');
    const score = async (p: Page) => Number(await p.textContent('#you-score')) + Number(await p.textContent('#them-score'));
    await expect.poll(() => score(alice.page), { timeout: 60_000 }).toBeGreaterThanOrEqual(2);
    await alice.page.screenshot({ path: screenshotPath('play') });

    for (const p of [alice, guest]) await p.page.locator('#result').waitFor({ state: 'visible', timeout: 90_000 });
    const outcomes = [await alice.page.getAttribute('#result', 'data-outcome'), await guest.page.getAttribute('#result', 'data-outcome')];
    expect([['won', 'lost'], ['lost', 'won'], ['draw', 'draw']]).toContainEqual(outcomes);
    const winner = outcomes[0] === 'won' ? alice.page : guest.page;
    expect(await winner.textContent('#result-text')).toBe('You won!');
    expect(await winner.textContent('#you-score')).toBe('5');
    await expect.poll(() => alice.page.locator('#chat-log .event').allTextContents()).toContainEqual(expect.stringMatching(/^Match over/));
    await guest.page.screenshot({ path: screenshotPath('play-result') });

    // Play again leads back to the lobby, still signed in.
    await alice.page.click('#again');
    await alice.page.locator('#lobby').waitFor({ state: 'visible' });

    // The page ran under the site's CSP without a violation or an uncaught error.
    expect(alice.problems).toEqual([]);
    expect(guest.problems).toEqual([]);
  }, 180_000);

  it('keeps the session over a reload and says why a sign-in failed', async () => {
    const { page, problems } = await player();
    // The browser's own checks let through what the service must refuse: a name with a space.
    await page.fill('#username', 'not valid');
    await page.fill('#password', 'correct horse battery');
    await page.click('#sign-up');
    await page.locator('#sign-in-error').waitFor({ state: 'visible' });
    expect(await page.textContent('#sign-in-error')).toBe('username may contain only letters, digits, underscore and hyphen (validation_failed)');

    await page.click('#guest');
    await page.locator('#lobby').waitFor({ state: 'visible' });
    const who = await page.textContent('#who');
    await page.reload();
    await page.locator('#lobby').waitFor({ state: 'visible' });
    expect(await page.textContent('#who')).toBe(who);
    await page.click('#sign-out');
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    await page.reload();
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    // The one refused sign-up is expected, nothing else.
    expect(problems).toEqual(['422 POST /api/v1/auth/register']);
  });

  it('serves the page with a CSP of self and hashed, cacheable assets', async () => {
    const res = await fetch(`${s.url}/play`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const script = /src="(\/play\/main-[A-Z0-9]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(s.url + script);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toContain('immutable');
  });
});

describe('the play setting', () => {
  it('off, /play is an unknown path', async () => {
    const off = await startTestServer({ play: false });
    try {
      const page = await off.call('GET', '/play');
      const unknown = await off.call('GET', '/nowhere');
      expect(page.status).toBe(404);
      expect(page.body.error).toEqual({ ...unknown.body.error, message: 'No route for GET /play.' });
    } finally {
      await off.close();
    }
  });
});
