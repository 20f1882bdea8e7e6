import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../runtime/contracts/errors';
import { SETTING_NAMES } from '../runtime/contracts/settings';
import { ERRORS_DOC, SETTINGS_DOC, withFreshTable } from './support/error-table';

// The tables of the manual that are checked against the code: the error codes
// (docs/rest-api.md) and the settings (docs/operations.md).
describe('docs/rest-api.md error table', () => {
  it('lists every code of the one error table with its status (regenerate: node --import tsx test/support/error-table.ts --write)', () => {
    const page = readFileSync(ERRORS_DOC, 'utf8');
    expect(page).toBe(withFreshTable(page));
    for (const [code, status] of Object.entries(ERROR_STATUS)) expect(page).toContain(`\`${code}\` ${status}`);
  });
});

describe('docs/operations.md configuration table', () => {
  it('has a row for every setting', () => {
    const page = readFileSync(SETTINGS_DOC, 'utf8');
    const start = page.indexOf('\n## Configuration\n');
    expect(start, 'docs/operations.md has a Configuration section').toBeGreaterThan(0);
    const end = page.indexOf('\n## ', start + 1);
    const table = page.slice(start, end < 0 ? undefined : end);
    expect(SETTING_NAMES.filter((name) => !table.includes(`| \`${name}\` |`))).toEqual([]);
    expect(SETTING_NAMES.length).toBeGreaterThan(40);
  });
});
