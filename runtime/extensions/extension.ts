import { CAPABILITIES } from '../contracts/capabilities';
import { ACTION_METHODS, EXTENSION_SEAMS, type ExtensionSeam } from '../contracts/extension';

// Extension modules import their types from here, beside the errors they throw.
export type {
  ActionCall,
  ActionMethod,
  Extension,
  ExtensionAction,
  ExtensionDataCall,
  ExtensionHost,
  ExtensionRpcMethod,
  ExtensionScreen,
  ExtensionSeam,
} from '../contracts/extension';

/** A failure an action declared: answered with its code, status and details. */
export class ExtensionError extends Error {
  constructor(
    readonly code: string,
    message?: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message ?? code);
    this.name = 'ExtensionError';
  }
}

/** An erase hook's refusal; the reason goes to the log. */
export class ExtensionRefusal extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ExtensionRefusal';
  }
}

const NAME = /^[a-z][a-z0-9_]{0,31}$/;
/** RPC namespaces the core serves itself (game scripts, the datagram stubs) and its own name. */
const RESERVED = ['game', 'asobi', 'svc'];
const MEMBER = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Every problem with a manifest, as one line each. Empty means sound. The
 * module is taken as untyped input: it was compiled separately, if at all.
 */
export function manifestProblems(value: unknown): string[] {
  if (value === null || typeof value !== 'object') return ['the default export is not an extension object'];
  const ext = value as Record<string, unknown>;
  const problems: string[] = [];
  const name = typeof ext.name === 'string' && NAME.test(ext.name) ? ext.name : null;
  if (!name) problems.push('name must be 1-32 of a-z 0-9 _ starting with a letter');
  if (name && RESERVED.includes(name)) problems.push(`name ${name} is reserved`);
  if (typeof ext.version !== 'string' || !/^[\x20-\x7e]{1,64}$/.test(ext.version)) problems.push('version must be 1-64 printable characters');
  const seams = Array.isArray(ext.seams) ? ext.seams : null;
  if (!seams) problems.push('seams must be a list');
  for (const seam of seams ?? []) if (!(EXTENSION_SEAMS as readonly unknown[]).includes(seam)) problems.push(`unknown seam ${String(seam)}`);
  const provided: Record<ExtensionSeam, boolean> = {
    rpc: ext.rpc !== undefined,
    actions: ext.actions !== undefined,
    export: ext.export !== undefined,
    erase: ext.erase !== undefined,
    console: ext.console !== undefined,
  };
  for (const seam of EXTENSION_SEAMS) {
    const declared = seams?.includes(seam) ?? false;
    if (provided[seam] && !declared) problems.push(`provides ${seam} without declaring it in seams`);
    if (declared && !provided[seam]) problems.push(`declares seam ${seam} without providing it`);
  }
  for (const hook of ['export', 'erase', 'setup'] as const) {
    if (ext[hook] !== undefined && typeof ext[hook] !== 'function') problems.push(`${hook} must be a function`);
  }
  problems.push(...membersProblems(ext.rpc, 'rpc', (method, key) => (typeof method.handle === 'function' ? [] : [`rpc.${key}.handle must be a function`])));
  problems.push(...membersProblems(ext.actions, 'actions', (action, key) => actionProblems(action, key, name)));
  if (ext.console !== undefined) problems.push(...consoleProblems(ext.console, ext.actions));
  return problems;
}

/** Each screen names a `GET` action the extension has: the console can only read through a screen. */
function consoleProblems(value: unknown, actions: unknown): string[] {
  const screens = value !== null && typeof value === 'object' ? (value as { screens?: unknown }).screens : undefined;
  if (!Array.isArray(screens) || screens.length === 0) return ['console.screens must be a non-empty list'];
  const problems: string[] = [];
  const ids = new Set<string>();
  screens.forEach((screen: unknown, i) => {
    const s = (screen ?? {}) as Record<string, unknown>;
    if (typeof s.id !== 'string' || !MEMBER.test(s.id)) problems.push(`console.screens[${i}].id must be 1-64 of A-Z a-z 0-9 _ -`);
    else if (ids.has(s.id)) problems.push(`console.screens[${i}].id ${s.id} is used twice`);
    else ids.add(s.id);
    if (typeof s.title !== 'string' || !/^[\x20-\x7e]{1,64}$/.test(s.title)) problems.push(`console.screens[${i}].title must be 1-64 printable characters`);
    const action = typeof s.action === 'string' ? (actions as Record<string, { method?: unknown }> | undefined)?.[s.action] : undefined;
    if (!action || action.method !== 'GET') problems.push(`console.screens[${i}].action must name a GET action of this extension`);
    if (s.fields !== undefined && (!Array.isArray(s.fields) || s.fields.length > 16 || !s.fields.every((f) => typeof f === 'string' && MEMBER.test(f)))) {
      problems.push(`console.screens[${i}].fields must be at most 16 names of A-Z a-z 0-9 _ -`);
    }
  });
  return problems;
}

function membersProblems(value: unknown, field: string, check: (member: Record<string, unknown>, key: string) => string[]): string[] {
  if (value === undefined) return [];
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [`${field} must be an object`];
  const problems: string[] = [];
  for (const [key, member] of Object.entries(value)) {
    if (!MEMBER.test(key)) problems.push(`${field} name ${key} must be 1-64 of A-Z a-z 0-9 _ -`);
    if (member === null || typeof member !== 'object') problems.push(`${field}.${key} must be an object`);
    else problems.push(...check(member as Record<string, unknown>, key));
  }
  return problems;
}

function actionProblems(action: Record<string, unknown>, key: string, name: string | null): string[] {
  const problems: string[] = [];
  if (!(ACTION_METHODS as readonly unknown[]).includes(action.method)) problems.push(`actions.${key}.method must be one of ${ACTION_METHODS.join(', ')}`);
  if (!(CAPABILITIES as readonly unknown[]).includes(action.capability)) problems.push(`actions.${key}.capability must be one of ${CAPABILITIES.join(', ')}`);
  if (typeof action.handle !== 'function') problems.push(`actions.${key}.handle must be a function`);
  if (action.errors !== undefined) {
    if (action.errors === null || typeof action.errors !== 'object') problems.push(`actions.${key}.errors must be an object`);
    else
      for (const [code, status] of Object.entries(action.errors)) {
        // Extensions add codes only in their own domain, so a core code keeps one meaning.
        if (!name || !code.startsWith(`${name}.`) || !/^[a-z0-9_]+(\.[a-z0-9_]+)+$/.test(code)) problems.push(`actions.${key}.errors: ${code} must be ${name ?? '<name>'}.<reason>`);
        if (!Number.isInteger(status) || (status as number) < 400 || (status as number) > 599) problems.push(`actions.${key}.errors.${code} must be an HTTP status 400-599`);
      }
  }
  return problems;
}
