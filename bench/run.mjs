// `npm run bench -- <name> [args]`: runs bench/<name>.ts (each prints a table
// and compares against a baseline it measures in the same run).
// `npm run soak -- <name> [args]`: runs bench/soak/<name>.ts (fault soaks).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const soak = args[0] === '--soak';
if (soak) args.shift();
const here = path.join(path.dirname(fileURLToPath(import.meta.url)), soak ? 'soak' : '');
const [name, ...rest] = args;
const available = readdirSync(here).filter((f) => f.endsWith('.ts') && !f.startsWith('_')).map((f) => f.slice(0, -3));
if (!name || !existsSync(path.join(here, `${name}.ts`))) {
  console.error(`usage: npm run ${soak ? 'soak' : 'bench'} -- <${available.join('|')}>`);
  process.exit(2);
}
// --expose-gc: memory figures (bench/lua, bench/memory) are read after a forced collection.
const result = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(here, `${name}.ts`), ...rest], { stdio: 'inherit' });
process.exit(result.status ?? 1);
