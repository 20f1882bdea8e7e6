import ipaddr from 'ipaddr.js';

/** One `trusted_proxies` entry: an address (a range of one) or a CIDR range, IPv4 or IPv6. */
export type AddressRange = [ipaddr.IPv4 | ipaddr.IPv6, number];

/**
 * Parses `203.0.113.7`, `10.0.0.0/8`, `2001:db8::1` or `2001:db8::/32`; null
 * for anything else. IPv4 must be the usual four decimal parts: ipaddr.js
 * would also take `10.1` or hex, which no operator means in a proxy list.
 * An IPv4-mapped IPv6 address is the IPv4 address it maps.
 */
export function parseAddressRange(entry: string): AddressRange | null {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const bitsText = slash < 0 ? null : entry.slice(slash + 1);
  const parsed = parseAddress(address);
  if (!parsed) return null;
  const max = parsed.kind() === 'ipv4' ? 32 : 128;
  if (bitsText === null) return [parsed, max];
  if (!/^\d{1,3}$/.test(bitsText)) return null;
  const bits = Number(bitsText);
  // A mapped address written with an IPv6 prefix length keeps its meaning over the IPv4 part.
  const adjusted = parsed.kind() === 'ipv4' && address.includes(':') ? bits - 96 : bits;
  return adjusted >= 0 && adjusted <= max ? [parsed, adjusted] : null;
}

/** A client address as a socket or a proxy reports it; null when it is not one. */
export function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (address.includes(':')) {
    if (!ipaddr.IPv6.isValid(address)) return null;
    const v6 = ipaddr.IPv6.parse(address);
    return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
  }
  return ipaddr.IPv4.isValidFourPartDecimal(address) ? ipaddr.IPv4.parse(address) : null;
}

export function inRange(address: ipaddr.IPv4 | ipaddr.IPv6, [base, bits]: AddressRange): boolean {
  return address.kind() === base.kind() && address.match(base, bits);
}
