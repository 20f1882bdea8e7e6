import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { CAPABILITIES, type Capability } from '../../runtime/contracts/capabilities';
import { isCapability, mintOperatorToken, TOKEN_TTL_MAX_S } from '../../runtime/ops/operators';
import { loadConfig } from '../config';

/**
 * `npm run ops -- <command>`: the operator's command line (dist/ops.mjs in a
 * production image). Commands read the same settings file as the node
 * (`--config <file>` or SVC_CONFIG), since they act with its `ops_secret`.
 */

export const OPS_USAGE = `usage: npm run -s ops -- <command> [options]
       (node dist/ops.mjs <command> [options] where only dist/ is installed)

commands:
  mint-token --caps <list> [--ttl <duration>] [--name <operator>] [--config <file>]
      Prints a short-lived operator token signed with ops_secret, on one line.
      --caps   comma-separated capability classes: ${CAPABILITIES.join(', ')}
      --ttl    lifetime: <n>s, <n>m or <n>h (default 15m, at most ${TOKEN_TTL_MAX_S / 3600}h)
      --name   who the token is for (printable ASCII, at most 64 bytes, no comma);
               audit rows record it as attested
      --config the settings file holding ops_secret (default: SVC_CONFIG)
  help
      Prints this.
`;

/** `15m` → 900. Bare digits are seconds. Null for anything else. */
export function parseDuration(text: string): number | null {
  const m = /^(\d{1,6})([smh]?)$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
}

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

/** Runs one command; the exit code it returns is the process's. */
export async function runOps(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help') {
    io.out(OPS_USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command !== 'mint-token') {
    io.err(`svc ops: unknown command '${command}'\n${OPS_USAGE}`);
    return 2;
  }
  let values: { caps?: string; ttl?: string; name?: string; config?: string };
  try {
    ({ values } = parseArgs({
      args: rest,
      options: { caps: { type: 'string' }, ttl: { type: 'string' }, name: { type: 'string' }, config: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    io.err(`svc ops: ${(err as Error).message}`);
    return 2;
  }
  const caps = (values.caps ?? '').split(',').map((c) => c.trim()).filter((c) => c !== '');
  const unknown = caps.filter((c) => !isCapability(c));
  if (caps.length === 0 || unknown.length > 0) {
    io.err(`svc ops: --caps needs one or more of ${CAPABILITIES.join(', ')}${unknown.length ? ` (not: ${unknown.join(', ')})` : ''}`);
    return 2;
  }
  const ttl = parseDuration(values.ttl ?? '15m');
  if (ttl === null || ttl < 1 || ttl > TOKEN_TTL_MAX_S) {
    io.err(`svc ops: --ttl must be 1s to ${TOKEN_TTL_MAX_S / 3600}h, written like 90s, 15m or 2h`);
    return 2;
  }
  let secret: string | undefined;
  try {
    secret = loadConfig(values.config !== undefined ? ['--config', values.config] : [], env).settings.ops_secret;
  } catch (err) {
    io.err(`svc ops: ${(err as Error).message}`);
    return 2;
  }
  if (!secret) {
    io.err('svc ops: the settings file sets no ops_secret (give it with --config <file> or SVC_CONFIG)');
    return 2;
  }
  try {
    const minted = await mintOperatorToken(secret, { caps: caps as Capability[], ttlSeconds: ttl, jti: randomUUID(), ...(values.name !== undefined ? { name: values.name } : {}) });
    io.out(minted.token);
    io.err(`token for ${caps.join(', ')}, expires ${new Date(minted.expiresAt).toISOString()}`);
    return 0;
  } catch (err) {
    io.err(`svc ops: ${(err as Error).message}`);
    return 2;
  }
}
