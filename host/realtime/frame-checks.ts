import type { z } from 'zod';
import type { Logger } from '../../runtime/platform/log';
import { RpcError } from '../../runtime/schemas/rpc';
import { clientFrames, ErrorFramePayload, serverPushes } from '../../runtime/schemas/wire';

/**
 * The outbound half of `response_checks` (the test suite runs with it on):
 * every frame a socket is about to send, push or reply, checked against the
 * payload schema the AsyncAPI document publishes for its type, so a drift
 * between what goes out and what clients were promised fails the suite
 * (docs/decisions/0055-response-checks-over-pushes.md).
 *
 * A frame that fails is not sent, as a failing reply answers `internal`
 * instead: a test waiting for it fails there, and the error line
 * `frame_check_failed` (which the test support turns into a failure when the
 * server closes) names the type and the problem for every other test.
 * With the setting off nothing here runs: the sessions hold no check.
 */
export function outboundFrameCheck(log: Logger): (text: string) => boolean {
  const exact = new Map<string, z.ZodType[]>();
  const templated: { prefix: string; schema: z.ZodType }[] = [];
  const declare = (type: string, schema: z.ZodType) => {
    // `match.<event>`: a script-chosen leaf under a prefix the server shares.
    const at = type.indexOf('<');
    if (at >= 0) return void templated.push({ prefix: type.slice(0, at), schema });
    const list = exact.get(type);
    if (!list) exact.set(type, [schema]);
    else if (!list.includes(schema)) list.push(schema);
  };
  declare('error', ErrorFramePayload);
  declare('rpc.error', RpcError);
  for (const frame of clientFrames) if (frame.reply) declare(frame.reply.type, frame.reply.payload);
  for (const push of serverPushes) declare(push.type, push.payload);

  // One encoded frame goes to many sockets (a broadcast, a state to a roster): checked once.
  let lastText = '';
  let lastVerdict = true;
  return (text) => {
    if (text === lastText) return lastVerdict;
    lastText = text;
    lastVerdict = true;
    const problem = problemOf(text, exact, templated);
    if (problem === null) return true;
    lastVerdict = false;
    log.error('frame_check_failed', { frame_type: problem.type, problem: problem.text });
    return false;
  };
}

function problemOf(text: string, exact: Map<string, z.ZodType[]>, templated: { prefix: string; schema: z.ZodType }[]): { type: string; text: string } | null {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return { type: '', text: 'not JSON' };
  }
  const f = (frame ?? {}) as Record<string, unknown>;
  const type = typeof f.type === 'string' ? f.type : '';
  if (type === '' || f.payload === null || typeof f.payload !== 'object' || Array.isArray(f.payload)) return { type, text: 'not a {type, payload} envelope' };
  const extra = Object.keys(f).filter((k) => k !== 'type' && k !== 'payload' && k !== 'cid');
  if (extra.length > 0) return { type, text: `envelope keys ${extra.join(', ')}` };
  const schemas = exact.get(type) ?? templated.filter((t) => type.startsWith(t.prefix)).map((t) => t.schema);
  if (schemas.length === 0) return { type, text: 'undeclared frame type' };
  let issues = '';
  for (const schema of schemas) {
    const result = schema.safeParse(f.payload);
    // The published document closes its objects (additionalProperties: false); zod strips what it was not told
    // of, so a key the parse dropped is one the document does not list.
    const undeclared = result.success ? droppedKeys(f.payload, result.data, '') : [];
    if (result.success && undeclared.length === 0) return null;
    issues ||= result.success ? `undeclared ${undeclared.join(', ')}` : result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  }
  return { type, text: issues };
}

/** Paths of the keys in `sent` that the parse left out of `parsed`. */
function droppedKeys(sent: unknown, parsed: unknown, at: string): string[] {
  if (sent === null || typeof sent !== 'object' || parsed === null || typeof parsed !== 'object') return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(sent)) {
    const path = at === '' ? k : `${at}.${k}`;
    if (!(k in parsed)) out.push(path);
    else out.push(...droppedKeys(v, (parsed as Record<string, unknown>)[k], path));
  }
  return out;
}
