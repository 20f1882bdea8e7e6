// The table of error codes in docs/rest-api.md ("Errors"), generated from the one
// error table so it cannot drift: `node --import tsx test/support/error-table.ts --write`
// rewrites it; test/readme-errors.test.ts fails when it is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_STATUS } from '../../runtime/contracts/errors';

/** The page that holds the error table. */
export const ERRORS_DOC = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../docs/rest-api.md');
/** The page that holds the settings table (its "Configuration" section). */
export const SETTINGS_DOC = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../docs/operations.md');
const START = '<!-- error-codes: generated from runtime/contracts/errors.ts -->';
const END = '<!-- /error-codes -->';

/** Codes by family (the part before the dot; bare codes are cross-cutting), in table order. */
export function errorCodeTable(): string {
  const families = new Map<string, string[]>();
  for (const [code, status] of Object.entries(ERROR_STATUS)) {
    const family = code.includes('.') ? code.slice(0, code.indexOf('.')) : '(cross-cutting)';
    const list = families.get(family) ?? [];
    list.push(`\`${code}\` ${status}`);
    families.set(family, list);
  }
  const rows = [...families].map(([family, codes]) => `| ${family} | ${codes.join(', ')} |`);
  return [START, '', '| Family | Codes and HTTP statuses |', '|---|---|', ...rows, '', END].join('\n');
}

/** The page with its table replaced by a fresh one. */
export function withFreshTable(page: string): string {
  const start = page.indexOf(START);
  const end = page.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/rest-api.md has no ${START} … ${END} block`);
  return page.slice(0, start) + errorCodeTable() + page.slice(end + END.length);
}

if (process.argv.includes('--write')) writeFileSync(ERRORS_DOC, withFreshTable(readFileSync(ERRORS_DOC, 'utf8')));
