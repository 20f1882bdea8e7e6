import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../runtime/contracts/errors';
import { SETTING_NAMES } from '../runtime/contracts/settings';
import { README, withFreshTable } from './support/error-table';

describe('README error table', () => {
  it('lists every code of the one error table with its status (regenerate: node --import tsx test/support/error-table.ts --write)', () => {
    const readme = readFileSync(README, 'utf8');
    expect(readme).toBe(withFreshTable(readme));
    for (const [code, status] of Object.entries(ERROR_STATUS)) expect(readme).toContain(`\`${code}\` ${status}`);
  });
});

describe('README configuration table', () => {
  it('has a row for every setting', () => {
    const readme = readFileSync(README, 'utf8');
    const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
    expect(SETTING_NAMES.filter((name) => !table.includes(`| \`${name}\` |`))).toEqual([]);
    expect(SETTING_NAMES.length).toBeGreaterThan(40);
  });
});
