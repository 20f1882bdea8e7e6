import { z } from 'zod';
import { ERROR_STATUS, type ErrorCode } from '../../runtime/contracts/errors';
import { ErrorObject, JsonObject } from '../../runtime/schemas/common';
import type { ClientFrameContract, PushContract } from '../../runtime/schemas/frame-contract';
import { RpcError } from '../../runtime/schemas/rpc';
import { clientFrames, ErrorFramePayload, serverPushes } from '../../runtime/schemas/wire';
import { route, type AnyRouteSpec, type Route } from '../contract';
import { extensionActionRoutes } from './ops/extensions';

/**
 * The two machine-readable API documents, generated from the contracts the
 * pipeline enforces, so they cannot drift from what the service does:
 * OpenAPI 3.1 for REST (`GET /api/v1/openapi.json`) and AsyncAPI 3 for the
 * socket (`GET /api/v1/asyncapi.json`). Each is built once, on first request.
 */

const TITLE = 'svc game backend';
const VERSION = '0.1.0';

type JsonSchema = Record<string, unknown>;

/** JSON Schema 2020-12 of a zod schema, as a client sends it (`input`) or as the service answers it (`output`). */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema;
  delete out.$schema;
  return out;
}

/** Codes every route of a kind can answer, beside the ones it declares. */
function commonErrors(spec: AnyRouteSpec): ErrorCode[] {
  const codes: ErrorCode[] = ['rate_limited', 'not_ready', 'internal'];
  if (spec.auth === 'player') codes.push('unauthenticated');
  if (spec.auth === 'operator') codes.push('forbidden');
  if (spec.params && Object.keys((spec.params as z.ZodObject).shape).length > 0) codes.push('validation_failed');
  if (spec.query) codes.push('validation_failed');
  if (spec.body && !spec.lenientBody) codes.push('invalid_json', 'invalid_payload', 'missing_field', 'length_required', 'payload_too_large', 'validation_failed');
  return codes;
}

function operationId(spec: AnyRouteSpec): string {
  // The root probes repeat `/api/v1/health…` by name, so their ids say where they are.
  const root = !spec.path.startsWith('/api/v1/') && !spec.path.startsWith('/console/');
  const words = (root ? `root${spec.path}` : spec.path)
    .replace(/^\/api\/v1\//, '')
    .split(/[/_.-]/)
    .filter((w: string) => w !== '')
    .map((w: string) => (w.startsWith(':') ? `by ${w.slice(1)}` : w))
    .join(' ')
    .split(' ');
  return [spec.method.toLowerCase(), ...words].map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join('');
}

function parametersOf(schema: z.ZodType | undefined, where: 'path' | 'query'): JsonSchema[] {
  const shape = (schema as z.ZodObject | undefined)?.shape ?? {};
  return Object.entries(shape).map(([name, field]) => {
    const s = field as z.ZodType;
    const optional = s.safeParse(undefined).success;
    const fieldSchema = jsonSchema(s, 'input');
    const description = fieldSchema.description;
    delete fieldSchema.description;
    return { name, in: where, required: where === 'path' || !optional, schema: fieldSchema, ...(description ? { description } : {}) };
  });
}

function operation(spec: AnyRouteSpec): JsonSchema {
  const codes = [...new Set([...spec.errors, ...commonErrors(spec)])] as ErrorCode[];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, JsonSchema> = {
    [String(spec.status ?? 200)]: { description: 'Success', content: { 'application/json': { schema: jsonSchema(spec.response, 'output') } } },
  };
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status)] = {
      description: `The error object; \`error.code\` one of: ${list.sort().map((c) => `\`${c}\``).join(', ')}`,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  const parameters = [...parametersOf(spec.params, 'path'), ...parametersOf(spec.query, 'query')];
  return {
    operationId: operationId(spec),
    summary: spec.summary,
    tags: [spec.tag],
    security: securityOf(spec),
    // OpenAPI 3.1 lets a bearer requirement list roles; the extension states the one class plainly for tools that ignore them.
    ...(spec.auth === 'operator' ? { 'x-svc-capability': spec.capability ?? null } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(spec.body
      ? { requestBody: { required: false, content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } } } }
      : {}),
    responses,
  };
}

function securityOf(spec: AnyRouteSpec): Record<string, string[]>[] {
  if (spec.auth === 'player') return [{ bearer: [] }];
  if (spec.auth === 'operator') return [{ operator: spec.capability ? [spec.capability] : [] }];
  return [];
}

export function openApiDocument(routes: readonly Route[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    (paths[path] ??= {})[r.method.toLowerCase()] = operation(r.spec);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: TITLE,
      version: VERSION,
      description: 'Every failure answers the error object with a code from a closed set; the status of each code is fixed.',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'An access token from sign-in.' },
        operator: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The operator plane (`/api/v1/ops/*`): the `ops_secret` setting itself (every capability class), or a short-lived operator token minted with it (`npm run ops -- mint-token`) carrying its classes. The role a route lists is its one capability class (`read`, `player_data`, `config`, `erasure`). Every refusal answers 403 `forbidden` with empty details; player tokens are never accepted.',
        },
      },
      schemas: { Error: jsonSchema(ErrorObject, 'output') },
    },
  };
}

/** A frame on the wire: the envelope around a payload. */
function envelope(type: string, payload: z.ZodType, io: 'input' | 'output', withCid: boolean): JsonSchema {
  return {
    type: 'object',
    properties: {
      type: type.includes('<') ? { type: 'string', description: `matches ${type}` } : { const: type },
      ...(withCid ? { cid: { description: 'Correlation id: echoed on the direct reply to a frame that carried one.' } } : {}),
      payload: jsonSchema(payload, io),
    },
    required: ['type', 'payload'],
  };
}

function key(direction: 'client' | 'server', type: string): string {
  return `${direction}.${type.replace(/[^A-Za-z0-9._-]/g, '_')}`;
}

export function asyncApiDocument(client: readonly ClientFrameContract[] = clientFrames, pushes: readonly PushContract[] = serverPushes): JsonSchema {
  const messages: Record<string, JsonSchema> = {};
  const operations: Record<string, JsonSchema> = {};
  const channelRef = { $ref: '#/channels/socket' };
  const ref = (id: string) => ({ $ref: `#/channels/socket/messages/${id}` });

  messages[key('server', 'error')] = {
    name: 'error',
    summary: 'The failure of a client frame; `cid` echoed when the frame had one and its envelope parsed.',
    payload: envelope('error', ErrorFramePayload, 'output', true),
  };
  messages[key('server', 'rpc.error')] = {
    name: 'rpc.error',
    summary: 'The failure of an rpc.call.',
    payload: envelope('rpc.error', RpcError, 'output', true),
  };
  for (const frame of client) {
    const id = key('client', frame.type);
    messages[id] = {
      name: frame.type,
      summary: frame.summary,
      payload: envelope(frame.type, frame.payload, 'input', true),
      ...(frame.auth ? { description: 'Only after a successful session.connect; before it the frame answers unknown_type.' } : {}),
    };
    const failure = frame.type === 'rpc.call' ? key('server', 'rpc.error') : key('server', 'error');
    const replies = [failure];
    if (frame.reply) {
      const replyId = key('server', frame.reply.type);
      messages[replyId] ??= { name: frame.reply.type, summary: `Reply to ${frame.type}.`, payload: envelope(frame.reply.type, frame.reply.payload, 'output', true) };
      replies.unshift(replyId);
    }
    operations[`on.${frame.type}`.replace(/[^A-Za-z0-9._-]/g, '_')] = {
      action: 'receive',
      channel: channelRef,
      summary: frame.summary,
      messages: [ref(id)],
      reply: { channel: channelRef, messages: replies.map(ref) },
    };
  }
  for (const push of pushes) {
    const id = key('server', push.type);
    messages[id] ??= { name: push.type, summary: push.summary, payload: envelope(push.type, push.payload, 'output', false) };
    operations[`push.${push.type}`.replace(/[^A-Za-z0-9._-]/g, '_')] = { action: 'send', channel: channelRef, summary: push.summary, messages: [ref(id)] };
  }
  return {
    asyncapi: '3.0.0',
    info: {
      title: TITLE,
      version: VERSION,
      description: 'The real-time socket: JSON text frames `{type, cid?, payload}` on `/ws`, on the same port as the REST API.',
    },
    defaultContentType: 'application/json',
    channels: { socket: { address: '/ws', messages } },
    operations,
  };
}

/** The routes that serve both documents over the routes the app mounts (including themselves). */
export function apiDocumentRoutes(routes: () => readonly Route[]): Route[] {
  let openApi: Record<string, unknown> | null = null;
  let asyncApi: Record<string, unknown> | null = null;
  return [
    route({
      method: 'GET',
      path: '/api/v1/openapi.json',
      summary: 'This OpenAPI 3.1 document',
      tag: 'documents',
      auth: 'none',
      rate: 'api',
      response: JsonObject,
      errors: [],
      // The installed extensions' actions are this deployment's routes too.
      handle: async ({ ctx }) => (openApi ??= openApiDocument([...routes(), ...extensionActionRoutes(ctx.extensions)])),
    }),
    route({
      method: 'GET',
      path: '/api/v1/asyncapi.json',
      summary: 'The AsyncAPI 3 document of the WebSocket protocol',
      tag: 'documents',
      auth: 'none',
      rate: 'api',
      response: JsonObject,
      errors: [],
      handle: async () => (asyncApi ??= asyncApiDocument()),
    }),
  ];
}
