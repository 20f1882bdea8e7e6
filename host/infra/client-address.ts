import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { parseAddress, parseAddressRange, inRange, type AddressRange } from '../../runtime/platform/address-ranges';

/**
 * Whose address a request or an upgrade carries. HTTP and the socket both key
 * their buckets on it, so both read the `trusted_proxies` setting through
 * this one file: a proxy trusted for one transport is trusted for the other.
 */

/** The client address a trusted proxy reports in `X-Forwarded-For`, or null when it names none. */
export function forwardedFor(req: IncomingMessage, proxies: TrustedProxies): string | null {
  const header = req.headers['x-forwarded-for'];
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return null;
  // Walk from the nearest hop outwards, skipping our own proxies.
  const hops = value.split(',').map((h) => h.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (!isIP(hop)) return null;
    if (!proxies.trusts(hop)) return hop;
  }
  return hops[0] ?? null;
}

/** The `trusted_proxies` setting: addresses and CIDR ranges, IPv4 and IPv6 (validated at boot). */
export class TrustedProxies {
  readonly #ranges: AddressRange[] = [];

  constructor(entries: string[]) {
    for (const entry of entries) {
      const range = parseAddressRange(entry);
      if (!range) throw new Error(`trusted_proxies: '${entry}' is not an address or CIDR range`);
      this.#ranges.push(range);
    }
  }

  trusts(address: string): boolean {
    if (this.#ranges.length === 0) return false;
    const parsed = parseAddress(address);
    return parsed !== null && this.#ranges.some((r) => inRange(parsed, r));
  }
}
