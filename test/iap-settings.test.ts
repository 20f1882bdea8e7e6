import { execFile, execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSettings, SettingsError, type RawSettings } from '../runtime/contracts/settings';
import { Deployments } from './support/deployments';
import { StoreCertificates } from './support/store-certificates';

/**
 * The store settings at boot: files and keys are read and checked when the
 * node starts, and a bad one stops it naming the setting; unset ones leave
 * the node up (the routes then say the store is not configured).
 */

const root = path.resolve(__dirname, '..');
const dir = mkdtempSync(path.join(tmpdir(), 'svc-iap-settings-'));
let deployments: Deployments;
let pki: StoreCertificates;

beforeAll(async () => {
  deployments = await Deployments.open();
  pki = StoreCertificates.make();
});
afterAll(async () => {
  await deployments?.close();
  pki?.remove();
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, content: string | Buffer): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

/** Boots the production Ctx with these settings; the SettingsError it stops with, or null when it boots. */
async function bootError(raw: RawSettings): Promise<SettingsError | null> {
  try {
    await deployments.start(raw);
    return null;
  } catch (err) {
    expect(err).toBeInstanceOf(SettingsError);
    return err as SettingsError;
  }
}

function rsaKey(format: 'pkcs8' | 'pkcs1' = 'pkcs8'): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: format, format: 'pem' }).toString();
}

const account = (overrides: Record<string, unknown> = {}) => ({ type: 'service_account', client_email: 'svc@example.iam.gserviceaccount.example', private_key: rsaKey(), ...overrides });

describe('store settings', () => {
  it('default the endpoints to the store and leave everything else unset', () => {
    const { settings } = parseSettings({});
    expect(settings.google_token_url).toBe('https://oauth2.googleapis.com/token');
    expect(settings.google_play_api_base).toBe('https://androidpublisher.googleapis.com');
    expect(settings.apple_root_cert_path).toBeUndefined();
    expect(settings.apple_bundle_id).toBeUndefined();
    expect(settings.google_service_account_key).toBeUndefined();
  });

  it('boot with roots as a PEM file, a DER file (as the store publishes them) or inline PEM and base64 DER', async () => {
    const der = execFileSync('openssl', ['x509', '-in', pki.rootFile, '-outform', 'DER']);
    expect(await bootError({ apple_root_cert_path: pki.rootFile })).toBeNull();
    expect(await bootError({ apple_root_cert_path: file('root.cer', der) })).toBeNull();
    expect(await bootError({ apple_root_certs: [pki.rootPem, der.toString('base64')] })).toBeNull();
  });

  it('stop the boot naming the root setting that cannot be read, does not parse or is no CA', async () => {
    expect((await bootError({ apple_root_cert_path: path.join(dir, 'absent.pem') }))?.key).toBe('apple_root_cert_path');
    expect((await bootError({ apple_root_cert_path: file('garbage.pem', '-----BEGIN CERTIFICATE-----\nbm9wZQ==\n-----END CERTIFICATE-----\n') }))?.key).toBe('apple_root_cert_path');
    expect((await bootError({ apple_root_cert_path: file('empty.pem', '') }))?.key).toBe('apple_root_cert_path');
    expect((await bootError({ apple_root_certs: [pki.rootPem, 'not a certificate'] }))?.key).toBe('apple_root_certs.1');
    const notCa = await bootError({ apple_root_certs: [pki.leafPem] });
    expect(notCa?.key).toBe('apple_root_certs.0');
    expect(notCa?.message).toContain('not a CA certificate');
  });

  it('boot with a service-account key inline, as JSON text or from a file', async () => {
    expect(await bootError({ google_service_account_key: account() })).toBeNull();
    expect(await bootError({ google_service_account_key: JSON.stringify(account()) })).toBeNull();
    expect(await bootError({ google_service_account_key_path: file('key.json', JSON.stringify(account())) })).toBeNull();
  });

  it('stop the boot naming the key setting that is unreadable or not a usable key, without echoing the key', async () => {
    const secret = rsaKey();
    const cases: [RawSettings, string][] = [
      [{ google_service_account_key_path: path.join(dir, 'absent.json') }, 'google_service_account_key_path'],
      [{ google_service_account_key_path: file('bad.json', `{"private_key": "${secret.replace(/\n/g, '\\n')}", oops`) }, 'google_service_account_key_path'],
      [{ google_service_account_key: `{"private_key": "${secret.replace(/\n/g, '\\n')}"` }, 'google_service_account_key'],
      [{ google_service_account_key: account({ client_email: undefined }) }, 'google_service_account_key'],
      [{ google_service_account_key: account({ private_key: undefined }) }, 'google_service_account_key'],
      [{ google_service_account_key: account({ private_key: rsaKey('pkcs1') }) }, 'google_service_account_key'],
      [{ google_service_account_key: account({ private_key: '-----BEGIN PRIVATE KEY-----\nbm9wZQ==\n-----END PRIVATE KEY-----\n' }) }, 'google_service_account_key'],
      [{ google_service_account_key: account({ private_key: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() }) }, 'google_service_account_key'],
      [{ google_service_account_key: account(), google_service_account_key_path: file('both.json', JSON.stringify(account())) }, 'google_service_account_key'],
    ];
    for (const [raw, key] of cases) {
      const err = await bootError(raw);
      expect(err?.key, JSON.stringify(Object.keys(raw))).toBe(key);
      expect(err!.message).not.toContain('PRIVATE KEY');
      expect(err!.message).not.toContain(secret.split('\n')[1]!.slice(0, 20));
    }
  });

  it('stop the node started from the command line with one message naming the setting', async () => {
    const config = file('boot.json', JSON.stringify({ apple_root_cert_path: path.join(dir, 'absent.pem') }));
    // The child runs on an embedded database of its own, whatever this run uses.
    const { DATABASE_URL: _, ...env } = process.env;
    const failed = await promisify(execFile)(process.execPath, [path.join(root, 'dist/host.mjs'), '--config', config], {
      cwd: dir,
      env: { ...env, PORT: '0', SVC_DATA_DIR: path.join(dir, 'data'), GAME_DIR: path.join(root, 'examples/demo-game') },
      timeout: 60_000,
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(failed).not.toBeNull();
    // A refused boot: exit 2 and one line naming the setting, no stack trace.
    expect(failed!.code).toBe(2);
    expect(failed!.stderr.trim().split('\n').filter((l) => l.startsWith('svc: '))).toEqual([expect.stringContaining("'apple_root_cert_path'")]);
    expect(failed!.stderr).not.toMatch(/^\s+at /m);
  }, 90_000);
});
