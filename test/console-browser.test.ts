import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordFinishedMatch } from '../runtime/matches/matches';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { guestSignIn, newDevice, PEPPER_V1 } from './support/guests';
import { launchChromium, screenshotPath } from './support/browser';
import { OPS_SECRET } from './support/ops';
import { startTestServer, type TestServer } from './support/server';
import { connectPlayer, type TestSocket } from './support/ws-client';

/**
 * The console as an operator uses it, in Chromium: sign in, walk every
 * screen of a seeded node, find a player, export and erase them, purge
 * guests, sign out. Each test leaves a screenshot (test/support/browser.ts).
 */

const VIEWPORT = { width: 1280, height: 800 };

let s: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let players: TestPlayer[];
let star: TestPlayer;
const sockets: TestSocket[] = [];
let extensionDir: string;
const pageProblems: string[] = [];

/** An extension whose manifest declares one operator screen over a GET action. */
const VIP_EXTENSION = `export default {
  name: 'vip',
  version: '2.1.0',
  seams: ['actions', 'console'],
  actions: {
    summary: {
      method: 'GET',
      capability: 'read',
      handle: (query) => ({ tier: query.tier, members: 2, top: [{ player: 'ada', points: 40 }, { player: 'grace', points: 12 }] }),
    },
  },
  console: { screens: [{ id: 'members', title: 'VIP members', action: 'summary', fields: ['tier'] }] },
};
`;

async function seed(): Promise<void> {
  players = [];
  for (const prefix of ['ada', 'grace', 'linus', 'alan', 'edsger']) players.push(await registerPlayer(s, 'correct horse', prefix));
  star = players[0]!;
  for (let i = 0; i < 3; i++) expect((await guestSignIn(s, newDevice())).status).toBe(200);
  // Leaderboard entries through the public API, written to the table as the flush job does.
  let score = 900;
  for (const p of players) {
    const res = await s.call('POST', '/api/v1/leaderboards/arena', { token: p.access_token, body: { score: (score -= 70), sub_score: 1 } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
  await s.leaderboardFlush.flush();
  // Finished matches, as the match loop records them.
  const started = new Date(Date.now() - 5 * 60_000);
  for (const [mode, status] of [['duo', 'finished'], ['duo', 'finished'], ['arena_ffa', 'error']] as const) {
    await recordFinishedMatch(s.ctx.db, {
      id: randomUUID(),
      mode,
      status,
      players: [star.player_id, players[1]!.player_id],
      result: { winner: star.player_id },
      startedAt: started,
      finishedAt: new Date(),
    });
  }
  // Economy rows as a catalogue sync writes them, and a wallet with its ledger.
  const db = s.ctx.db;
  await db.insertInto('currencies').values([{ code: 'gold', name: 'Gold' }, { code: 'gems', name: 'Gems' }] as never).execute();
  const sword = randomUUID();
  const shield = randomUUID();
  await db.insertInto('item_defs').values([
    { id: sword, slug: 'iron_sword', name: 'Iron Sword', category: 'weapon', rarity: 'rare' },
    { id: shield, slug: 'round_shield', name: 'Round Shield', category: 'armour', rarity: 'common' },
  ] as never).execute();
  await db.insertInto('store_listings').values([
    { id: randomUUID(), slug: 'sword_gold', item_def_id: sword, currency: 'gold', price: 120, active: true },
    { id: randomUUID(), slug: 'shield_gems', item_def_id: shield, currency: 'gems', price: 5, active: false },
  ] as never).execute();
  const wallet = randomUUID();
  await db.insertInto('wallets').values({ id: wallet, player_id: star.player_id, currency: 'gold', balance: 250 } as never).execute();
  await db.insertInto('transactions').values({ id: randomUUID(), wallet_id: wallet, amount: 250, balance_after: 250, reason: 'seed' } as never).execute();
}

/** Waits until the element's text reads as expected (a screen fills in after its request answers). */
async function shows(locator: Locator, text: string | RegExp): Promise<void> {
  await locator.filter({ hasText: text }).first().waitFor();
}

function exactly(text: string): RegExp {
  return new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}

async function shot(name: string, target: Page = page): Promise<void> {
  await target.screenshot({ path: screenshotPath(`console-${name}`) });
}

async function go(label: string, heading: string | RegExp): Promise<void> {
  await page.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: label, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

beforeAll(async () => {
  extensionDir = mkdtempSync(path.join(tmpdir(), 'console-ext-'));
  writeFileSync(path.join(extensionDir, 'vip.mjs'), VIP_EXTENSION);
  s = await startTestServer(
    {
      ops_secret: OPS_SECRET,
      console: true,
      console_erasure: true,
      guest_verifier_pepper: { v1: PEPPER_V1 },
      leaderboard_client_submit: 'all',
      extensions: [path.join(extensionDir, 'vip.mjs')],
    },
    { game: { guestAuth: () => true, registration: () => null } },
  );
  await seed();
  for (let i = 0; i < 2; i++) sockets.push((await connectPlayer(s, 'online')).socket);
  browser = await launchChromium();
  context = await browser.newContext({ viewport: VIEWPORT, acceptDownloads: true, colorScheme: 'light' });
  page = await context.newPage();
  // Script errors and CSP violations surface here; refused requests (401/403 on purpose) do not count.
  page.on('pageerror', (err) => pageProblems.push(err.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) pageProblems.push(msg.text());
  });
}, 120_000);

afterAll(async () => {
  for (const socket of sockets) socket.ws.close();
  await browser?.close();
  await s?.close();
  rmSync(extensionDir, { recursive: true, force: true });
});

describe('the operator console in Chromium', () => {
  it('signs in with the secret (a wrong one is refused) and sets the session and CSRF cookies', async () => {
    const res = await page.goto(`${s.url}/console`);
    expect(res!.status()).toBe(200);
    expect(res!.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByLabel('Operator secret').fill('not the secret at all, sorry');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await shows(page.getByRole('alert'), 'not the operator secret');
    await shot('sign-in');

    await page.getByLabel('Operator secret').fill(OPS_SECRET);
    await page.getByLabel(/Your name/).fill('Ada Ops');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await shows(page.getByTestId('who'), exactly('Ada Ops'));

    const cookies = await context.cookies(s.url);
    const session = cookies.find((c) => c.name === 'svc_console')!;
    const csrf = cookies.find((c) => c.name === 'svc_console_csrf')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Lax', secure: false, path: '/' });
    expect(csrf).toMatchObject({ httpOnly: false, sameSite: 'Lax', secure: false, path: '/' });
    // The page's script can read the CSRF cookie but never the session one.
    const visible = await page.evaluate(() => document.cookie);
    expect(visible).toContain(`svc_console_csrf=${csrf.value}`);
    expect(visible).not.toContain(session.value);
  });

  it('shows node figures, features and live charts on the overview', async () => {
    await page.getByTestId('features').waitFor();
    await shows(page.getByTestId('features'), 'console');
    await shows(page.getByTestId('figure-online'), exactly('Online players2'));
    // More players come online: the figures and charts follow without a reload.
    for (let i = 0; i < 2; i++) sockets.push((await connectPlayer(s, 'online')).socket);
    await shows(page.getByTestId('figure-online'), exactly('Online players4'));
    await page.locator('[data-testid="chart-online"][data-points="4"]').waitFor({ timeout: 30_000 });
    expect(await page.locator('.chart canvas').count()).toBe(4);
    expect(await page.getByTestId('version-banner').count()).toBe(0);
    await shot('overview');
  });

  it('warns when the server runs another core version than the console was built for', async () => {
    const other = await context.newPage();
    let served = 0;
    await other.route('**/api/v1/ops/features', async (route) => {
      served++;
      const real = await route.fetch();
      const body = await real.json();
      body.data.core.version = '99.0.0';
      await route.fulfill({ response: real, json: body });
    });
    await other.goto(`${s.url}/console/players`);
    await shows(other.getByTestId('version-banner'), '99.0.0');
    await shot('version-banner', other);
    // The overview lists the same features the banner read: the app asks once.
    await other.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Overview', exact: true }).click();
    await shows(other.getByTestId('features'), '99.0.0');
    expect(served).toBe(1);
    await other.close();
  });

  it("says a list is loading until its first read answers (not 'No rows'), and asks for no favicon", async () => {
    const other = await context.newPage();
    const asked: string[] = [];
    other.on('request', (r) => asked.push(new URL(r.url()).pathname));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await other.route(/\/api\/v1\/ops\/players(\?|$)/, async (route) => {
      await held;
      await route.continue();
    });
    await other.goto(`${s.url}/console/players`);
    await shows(other.getByTestId('page-summary'), exactly('Loading…'));
    expect(await other.getByTestId('page-summary').textContent()).toBe('Loading…');
    release();
    await shows(other.getByTestId('page-summary'), / of /);
    expect(asked).toContain('/api/v1/ops/players');
    expect(asked).not.toContain('/favicon.ico');
    await other.close();
  });

  it('walks every screen against the seeded node', async () => {
    await go('Players', 'Players');
    await page.getByRole('link', { name: star.username }).waitFor();

    await go('Matches', 'Matches');
    await page.getByRole('cell', { name: 'arena_ffa' }).waitFor();
    await shows(page.getByTestId('page-summary'), exactly('1–3 of 3'));

    await go('Matchmaker', 'Matchmaker');
    await page.getByTestId('mm-waiting').waitFor();
    await page.getByText('Nobody is queued.').waitFor();

    await go('Economy', 'Economy');
    await page.getByRole('cell', { name: 'Iron Sword' }).waitFor();
    await page.getByRole('link', { name: 'Listings' }).click();
    await page.getByRole('cell', { name: '120', exact: true }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/console/economy/listings');
    await shot('economy');

    await go('Chat', 'Chat');
    await page.getByText('No channel runs on this node.').waitFor();
    await page.getByLabel('Channel id').fill('global:lobby');
    await page.getByRole('button', { name: 'Open history' }).click();
    await page.getByRole('heading', { level: 1, name: 'global:lobby' }).waitFor();
    await page.getByLabel('Sender').waitFor();

    await go('Tournaments', 'Tournaments');
    await go('Notifications', 'Notifications');
    await go('Audit log', 'Audit log');
    await go('Guest purge', 'Guest purge');

    // The extension's screen, from its manifest: its field lives in the address.
    await go('VIP members', 'VIP members');
    await page.getByLabel('tier').fill('gold');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('cell', { name: 'grace' }).waitFor();
    await shows(page.getByTestId('extension-result'), 'tiergold');
    expect(new URL(page.url()).pathname + new URL(page.url()).search).toBe('/console/ext/vip/members?tier=gold');

    await go('Leaderboards', 'Leaderboards');
    await page.getByRole('link', { name: 'arena' }).click();
    await page.getByRole('heading', { level: 1, name: 'arena' }).waitFor();
    await shows(page.getByTestId('page-summary'), exactly('1–5 of 5'));
    const ranks = await page.locator('tbody tr td:first-child').allTextContents();
    expect(ranks).toEqual(['1', '2', '3', '4', '5']);
    await shot('leaderboard');
  });

  it('keeps a list view in the address: sort and paging survive a reload and deep links open directly', async () => {
    await page.goto(`${s.url}/console/leaderboards/board?id=arena&limit=2&offset=2`);
    await page.getByRole('heading', { level: 1, name: 'arena' }).waitFor();
    await shows(page.getByTestId('page-summary'), exactly('3–4 of 5'));
    expect(await page.locator('tbody tr td:first-child').allTextContents()).toEqual(['3', '4']);
    await page.getByRole('button', { name: 'Next' }).click();
    await shows(page.getByTestId('page-summary'), exactly('5–5 of 5'));
    expect(new URL(page.url()).searchParams.get('offset')).toBe('4');
    await page.goto(`${s.url}/console/players?sort=username&order=desc&limit=10`);
    await page.getByRole('cell').first().waitFor();
    const names = await page.locator('tbody tr td:first-child').allTextContents();
    expect(names).toEqual([...names].sort().reverse());
    await page.goto(`${s.url}/console/no/such/screen`);
    await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
  });

  it('searches a player, shows the player page and downloads the export', async () => {
    await page.goto(`${s.url}/console/players`);
    await page.getByRole('searchbox').fill(star.username);
    await page.getByRole('button', { name: 'Apply' }).click();
    await shows(page.getByTestId('page-summary'), exactly('1–1 of 1'));
    expect(new URL(page.url()).searchParams.get('q')).toBe(star.username);
    // Drawing the page reads the light routes; the export (every table) waits for its button.
    const asked: string[] = [];
    const watch = (request: { url(): string }) => void asked.push(new URL(request.url()).pathname);
    page.on('request', watch);
    await page.getByRole('link', { name: star.username }).click();
    await shows(page.getByTestId('player-username'), star.username);
    // A password account links no provider; only linked providers are named (never their ids).
    await shows(page.getByTestId('player-providers'), exactly('Providersnone'));
    await page.getByRole('cell', { name: 'gold' }).waitFor();
    await page.getByRole('cell', { name: 'arena_ffa' }).waitFor();
    await shows(page.getByTestId('player-games'), exactly('Games3 (3 won)'));
    await shot('player');
    expect(asked).toContain(`/api/v1/ops/players/${star.player_id}/summary`);
    expect(asked.filter((p) => p.endsWith('/export'))).toEqual([]);

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export JSON' }).click()]);
    page.off('request', watch);
    expect(asked.filter((p) => p.endsWith('/export'))).toEqual([`/api/v1/ops/players/${star.player_id}/export`]);
    expect(download.suggestedFilename()).toBe(`player-${star.player_id}.json`);
    const exported = JSON.parse(readFileSync(await download.path(), 'utf8'));
    expect(exported.player_id).toBe(star.player_id);
    expect(exported.tables.wallets).toEqual([expect.objectContaining({ currency: 'gold', balance: 250 })]);
  });

  it('erases a player only after the right username echo', async () => {
    const victim = players[4]!;
    await page.goto(`${s.url}/console/players/${victim.player_id}`);
    await page.getByRole('button', { name: 'Erase…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Username').fill(victim.username + 'x');
    await dialog.getByRole('button', { name: 'Erase player' }).click();
    await shows(dialog.getByRole('alert'), 'ops.confirmation_mismatch');
    expect((await s.call('GET', `/api/v1/ops/players/${victim.player_id}`, { token: OPS_SECRET })).status).toBe(200);
    await shot('erase');

    await dialog.getByLabel('Username').fill(victim.username);
    await dialog.getByRole('button', { name: 'Erase player' }).click();
    await page.getByRole('status').filter({ hasText: `Erased ${victim.username}` }).waitFor();
    expect((await s.call('GET', `/api/v1/ops/players/${victim.player_id}`, { token: OPS_SECRET })).status).toBe(404);
    const audit = await s.call('GET', `/api/v1/ops/audit?target_id=${victim.player_id}`, { token: OPS_SECRET });
    expect(audit.body.data).toEqual([expect.objectContaining({ actor_display: 'Ada Ops', actor_source: 'console', outcome: 'ok' })]);
  });

  it('purges guests: a dry run counts, the purge needs that count echoed', async () => {
    await go('Guest purge', 'Guest purge');
    await page.getByLabel('Unused for').fill('0');
    await page.getByRole('button', { name: 'Dry run' }).click();
    await shows(page.getByTestId('purge-matched'), exactly('3'));
    expect((await s.call('GET', '/api/v1/ops/players?guest=true', { token: OPS_SECRET })).body.page.total).toBe(3);
    await page.getByLabel('Type 3 to erase them').fill('2');
    await page.getByRole('button', { name: 'Purge guests' }).click();
    await shows(page.getByRole('alert'), 'ops.purge_count_mismatch');
    expect((await s.call('GET', '/api/v1/ops/players?guest=true', { token: OPS_SECRET })).body.page.total).toBe(3);
    await page.getByLabel('Type 3 to erase them').fill('3');
    await page.getByRole('button', { name: 'Purge guests' }).click();
    await shows(page.getByTestId('purge-result'), 'Deleted3');
    expect((await s.call('GET', '/api/v1/ops/players?guest=true', { token: OPS_SECRET })).body.page.total).toBe(0);
    await shot('guest-purge');
  });

  it('refuses a console-origin ops request without the CSRF header', async () => {
    const answers = await page.evaluate(async () => {
      const csrf = /svc_console_csrf=([^;]*)/.exec(document.cookie)![1]!;
      const bare = await fetch('/api/v1/ops/stats');
      const wrong = await fetch('/api/v1/ops/stats', { headers: { 'x-csrf-token': 'forged' } });
      const right = await fetch('/api/v1/ops/stats', { headers: { 'x-csrf-token': csrf } });
      const session = await fetch('/console/session');
      return { bare: [bare.status, await bare.json()], wrong: wrong.status, right: right.status, session: session.status };
    });
    expect(answers.bare).toEqual([403, { error: { code: 'forbidden', message: expect.any(String), details: {} } }]);
    expect(answers.wrong).toBe(403);
    expect(answers.right).toBe(200);
    expect(answers.session).toBe(403);
  });

  it('is usable on a phone: the navigation folds into a menu and tables stack', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, storageState: await context.storageState(), colorScheme: 'light' });
    const small = await phone.newPage();
    await small.goto(`${s.url}/console/players`);
    await small.getByRole('heading', { level: 1, name: 'Players' }).waitFor();
    const nav = small.getByRole('navigation', { name: 'Screens' });
    expect(await nav.isVisible()).toBe(false);
    await small.getByRole('button', { name: 'Menu' }).click();
    expect(await nav.isVisible()).toBe(true);
    await nav.getByRole('link', { name: 'Leaderboards' }).click();
    await small.getByRole('heading', { level: 1, name: 'Leaderboards' }).waitFor();
    expect(await nav.isVisible()).toBe(false);
    // No sideways scrolling at phone width.
    expect(await small.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    await shot('phone', small);
    await phone.close();
  });

  it('signs out: the cookies go, the session ends on the server, and screens ask for the secret again', async () => {
    const before = (await context.cookies(s.url)).find((c) => c.name === 'svc_console')!;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Operator secret').waitFor();
    expect((await context.cookies(s.url)).map((c) => c.name)).not.toContain('svc_console');
    // The old cookie, replayed, opens nothing.
    const replay = await s.call('GET', '/api/v1/ops/stats', { headers: { cookie: `svc_console=${before.value}` } });
    expect(replay.status).toBe(403);
    await page.goto(`${s.url}/console/audit`);
    await page.getByLabel('Operator secret').waitFor();
    await shot('signed-out');
    // Across every screen above: no script error, no Content-Security-Policy violation.
    expect(pageProblems).toEqual([]);
  });
});

describe('the console site', () => {
  it('serves hashed assets immutable, the index no-cache, and refuses traversal', async () => {
    const index = await fetch(`${s.url}/console/`);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const html = await index.text();
    const script = /src="(\/console\/main-[A-Z0-9]+\.js)"/.exec(html)![1]!;
    const style = /href="(\/console\/main-[A-Z0-9]+\.css)"/.exec(html)![1]!;
    expect(html).not.toMatch(/<script>|<style>|style="/);
    const js = await fetch(s.url + script);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(s.url + style)).headers.get('content-type')).toBe('text/css; charset=utf-8');
    for (const bad of ['/console/../package.json', '/console/%2e%2e/package.json', '/console/..%2fpackage.json', '/console/main.js', '/console//etc/passwd', '/console/%5c..%5cx']) {
      const res = await fetch(s.url + bad);
      expect(res.status, bad).toBe(404);
      expect((await res.json()).error.code, bad).toMatch(/not_found$/);
    }
    const post = await fetch(`${s.url}/console/players`, { method: 'POST' });
    expect(post.status).toBe(404);
    const head = await fetch(`${s.url}/console/players/some-id`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(head.headers.get('x-frame-options')).toBe('DENY');
  });
});

describe('a console without console_erasure', () => {
  it('hides erasure: no Erase button on the player page, no purge form', async () => {
    const plain = await startTestServer({ ops_secret: OPS_SECRET, console: true });
    const ctx = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light' });
    try {
      const player = await registerPlayer(plain, 'correct horse', 'kept');
      const tab = await ctx.newPage();
      await tab.goto(`${plain.url}/console/players/${player.player_id}`);
      await tab.getByLabel('Operator secret').fill(OPS_SECRET);
      await tab.getByRole('button', { name: 'Sign in' }).click();
      await shows(tab.getByTestId('player-username'), player.username);
      // The deep link survived sign-in; the export is there, the erase button is not.
      await tab.getByRole('button', { name: 'Export JSON' }).waitFor();
      expect(await tab.getByRole('button', { name: 'Erase…' }).count()).toBe(0);
      await shows(tab.getByTestId('who'), exactly('operator'));
      await tab.getByRole('navigation', { name: 'Screens' }).getByRole('link', { name: 'Guest purge' }).click();
      await shows(tab.locator('.notice'), 'console_erasure');
      expect(await tab.getByRole('button', { name: 'Dry run' }).count()).toBe(0);
      await shot('no-erasure', tab);
    } finally {
      await ctx.close();
      await plain.close();
    }
  });
});
