/**
 * `npm run coverage-table`: rewrites the README's coverage table from the
 * binding registry (runtime/lua/coverage.ts). test/script-coverage.test.ts
 * fails until it has been run after the registry changed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withCoverageTable } from '../runtime/lua/coverage';

const readme = fileURLToPath(new URL('../README.md', import.meta.url));
const before = readFileSync(readme, 'utf8');
const after = withCoverageTable(before);
if (after === before) console.log('README.md coverage table is up to date');
else {
  writeFileSync(readme, after);
  console.log('README.md coverage table rewritten');
}
