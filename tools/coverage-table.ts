/**
 * `npm run coverage-table`: rewrites the coverage table of docs/scripting.md from the
 * binding registry (runtime/lua/coverage.ts). test/script-coverage.test.ts
 * fails until it has been run after the registry changed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withCoverageTable } from '../runtime/lua/coverage';

const page = fileURLToPath(new URL('../docs/scripting.md', import.meta.url));
const before = readFileSync(page, 'utf8');
const after = withCoverageTable(before);
if (after === before) console.log('docs/scripting.md coverage table is up to date');
else {
  writeFileSync(page, after);
  console.log('docs/scripting.md coverage table rewritten');
}
