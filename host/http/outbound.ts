import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { OutboundFetch } from '../../runtime/accounts/oidc';
import { SettingsError } from '../../runtime/contracts/settings';

/**
 * The host's fetch for calls to identity providers and stores: node:https with an
 * optional pinned trust anchor (the CA file replaces the system roots), a
 * time bound over the whole exchange, and a cap on what it will buffer. The
 * runtime receives it as a plain fetch-like function (runtime/accounts/oidc.ts).
 */

export interface OutboundOptions {
  /** PEM text of the only CAs to trust; unset trusts the system roots. */
  ca?: string;
  timeoutMs: number;
  maxBytes?: number;
}

const DEFAULT_MAX_BYTES = 1024 * 1024;

/** Reads `oidc_ca_file` at boot; an unreadable or certificate-less file stops the boot. */
export function readTrustAnchor(file: string | undefined): string | undefined {
  if (!file) return undefined;
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new SettingsError('oidc_ca_file', `cannot read ${file}: ${(err as Error).message}`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new SettingsError('oidc_ca_file', `${file} holds no PEM certificate`);
  return pem;
}

export function outboundFetch(options: OutboundOptions): OutboundFetch {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const agent = new https.Agent({ keepAlive: true, ...(options.ca ? { ca: options.ca } : {}) });
  return (url, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const target = new URL(url);
      const secure = target.protocol === 'https:';
      if (!secure && target.protocol !== 'http:') return reject(new Error(`unsupported protocol ${target.protocol}`));
      const request = (secure ? https : http).request(
        target,
        { method: init.method ?? 'GET', headers: init.headers ?? {}, ...(secure ? { agent } : {}) },
        (res) => {
          const chunks: Buffer[] = [];
          let total = 0;
          res.on('data', (chunk: Buffer) => {
            total += chunk.length;
            if (total > maxBytes) {
              request.destroy(new Error(`response over ${maxBytes} bytes`));
              return;
            }
            chunks.push(chunk);
          });
          res.on('end', () => {
            clearTimeout(timer);
            const headers = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (typeof value === 'string') headers.set(name, value);
              else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
            }
            const status = res.statusCode ?? 502;
            const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
            try {
              resolve(new Response(body, { status, headers }));
            } catch (err) {
              reject(err);
            }
          });
          res.on('error', reject);
        },
      );
      const timer = setTimeout(() => {
        const err = new Error(`no complete answer within ${options.timeoutMs} ms`);
        err.name = 'TimeoutError';
        request.destroy(err);
      }, options.timeoutMs);
      request.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      request.end(init.body);
    });
}
