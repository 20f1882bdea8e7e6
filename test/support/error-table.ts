// The README's table of error codes, generated from the one error table so it
// cannot drift: `node --import tsx test/support/error-table.ts --write`
// rewrites it; test/readme.test.ts fails when it is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_STATUS } from '../../runtime/contracts/errors';

export const README = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../README.md');
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

/** The README with its table replaced by a fresh one. */
export function withFreshTable(readme: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`README.md has no ${START} … ${END} block`);
  return readme.slice(0, start) + errorCodeTable() + readme.slice(end + END.length);
}

if (process.argv.includes('--write')) writeFileSync(README, withFreshTable(readFileSync(README, 'utf8')));
