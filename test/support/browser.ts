import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's Chromium, headless. The flags keep it from reaching for Google's
 * services, which this machine's closed network refuses many at a time.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/**
 * Where a browser test leaves its screenshot `name`: a temporary directory,
 * or the documentation's pictures when SVC_SCREENSHOTS names that directory
 * (`SVC_SCREENSHOTS=docs/screenshots npm test` refreshes them), so that an
 * ordinary test run never rewrites tracked files.
 */
export function screenshotPath(name: string): string {
  const dir = process.env.SVC_SCREENSHOTS ? path.resolve(process.env.SVC_SCREENSHOTS) : path.join(tmpdir(), 'svc-screenshots');
  mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}.png`);
}
