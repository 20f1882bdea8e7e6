import { runOps } from './commands';

// The bundle's entry (dist/ops.mjs): the command line above, with the process's streams and exit code.
const code = await runOps(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(line.endsWith('\n') ? line : `${line}\n`),
  err: (line) => process.stderr.write(line.endsWith('\n') ? line : `${line}\n`),
});
process.exitCode = code;
