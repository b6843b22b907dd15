/**
 * The address floor: the addresses no command's connection may reach, whatever the
 * policy allows — loopback, unspecified, link-local (the cloud metadata services among
 * them), private (RFC 1918), carrier-grade NAT, unique-local, multicast and reserved — in
 * every spelling an address can take. An IPv4 address is read the way the C library's
 * `inet_aton` reads it (`127.1`, `0x7f.1`, `0177.0.0.1`, `2130706433`), so that what is
 * checked is what a resolver would dial; an IPv6 address is checked as itself and as
 * every IPv4 address it embeds (mapped, compatible, NAT64, 6to4, Teredo). Only the host's
 * own environment lifts the floor (`IO_HARNESS_ALLOW_LOCAL_ADDRESSES=1`), never a
 * contract or a configuration file. The egress proxy applies it to every address it
 * dials, after resolving a name once.
 */
import { isIPv6 } from 'node:net';

export type FloorVerdict = { ok: true } | { ok: false; rule: string; reason: string };

/** The variable of the harness's environment that lifts the floor, set to `1`. */
export const ALLOW_LOCAL_ADDRESSES = 'IO_HARNESS_ALLOW_LOCAL_ADDRESSES';

/** Whether the host's environment lifts the floor. */
export function floorLifted(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[ALLOW_LOCAL_ADDRESSES] === '1';
}

/** One part of an `inet_aton` address: decimal, octal with a leading 0, or hexadecimal with 0x. */
function part(text: string): number | null {
  if (/^0[xX][0-9a-fA-F]*$/.test(text)) return text.length === 2 ? 0 : Number.parseInt(text.slice(2), 16);
  if (/^0[0-7]*$/.test(text)) return Number.parseInt(text, 8) || 0;
  if (/^[1-9][0-9]*$/.test(text)) return Number.parseInt(text, 10);
  return null;
}

/**
 * The four bytes of an IPv4 address in any spelling `inet_aton` takes: one to four parts,
 * the last filling the bytes left (`127.1` is 127.0.0.1, `2130706433` is 127.0.0.1). Null
 * when it is no such address.
 */
export function parseIPv4(text: string): number[] | null {
  const trimmed = text.endsWith('.') ? text.slice(0, -1) : text;
  const parts = trimmed.split('.');
  if (parts.length < 1 || parts.length > 4 || parts.some((item) => item === '')) return null;
  const values = parts.map(part);
  if (values.some((value) => value === null)) return null;
  const numbers = values as number[];
  const last = numbers[numbers.length - 1] as number;
  const head = numbers.slice(0, -1);
  if (head.some((value) => value > 255)) return null;
  const room = 4 - head.length;
  if (last >= 2 ** (8 * room)) return null;
  const tail: number[] = [];
  for (let index = room - 1; index >= 0; index--) tail.push(Math.floor(last / 2 ** (8 * index)) % 256);
  return [...head, ...tail];
}

/** The sixteen bytes of an IPv6 address (brackets and a zone index allowed), or null. */
export function parseIPv6(text: string): number[] | null {
  let address = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const zone = address.indexOf('%');
  if (zone >= 0) address = address.slice(0, zone);
  if (!isIPv6(address)) return null;
  let groups: string[];
  const tail4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (tail4) {
    const v4 = parseIPv4(tail4[1] as string) as number[];
    address = `${address.slice(0, -(tail4[1] as string).length)}${((v4[0] as number) * 256 + (v4[1] as number)).toString(16)}:${((v4[2] as number) * 256 + (v4[3] as number)).toString(16)}`;
  }
  const halves = address.split('::');
  const left = halves[0] ? (halves[0] as string).split(':') : [];
  const right = halves.length > 1 && halves[1] ? (halves[1] as string).split(':') : [];
  if (halves.length > 1) groups = [...left, ...Array(8 - left.length - right.length).fill('0'), ...right];
  else groups = left;
  if (groups.length !== 8) return null;
  const bytes: number[] = [];
  for (const group of groups) {
    const value = Number.parseInt(group, 16);
    bytes.push(Math.floor(value / 256), value % 256);
  }
  return bytes;
}

/**
 * The one spelling of an address that policy rules are matched against: IPv4 as four
 * decimal bytes; IPv4-mapped IPv6 (`::ffff:a.b.c.d`, however written) as that IPv4; other
 * IPv6 as RFC 5952 writes it (lower case, no leading zeros, the longest run of zero
 * groups as `::`), without brackets or a zone.
 */
export function canonicalAddress(address: { version: 4 | 6; bytes: number[] }): string {
  const bytes = address.bytes;
  if (address.version === 4) return bytes.join('.');
  if (bytes.slice(0, 10).every((byte) => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff)
    return bytes.slice(12).join('.');
  const groups: number[] = [];
  for (let index = 0; index < 16; index += 2)
    groups.push(((bytes[index] as number) << 8) | (bytes[index + 1] as number));
  let best = { at: -1, length: 0 };
  for (let at = 0; at < 8; ) {
    let end = at;
    while (end < 8 && groups[end] === 0) end++;
    if (end - at > best.length) best = { at, length: end - at };
    at = end > at ? end : at + 1;
  }
  const hex = (list: number[]) => list.map((group) => group.toString(16)).join(':');
  if (best.length < 2) return hex(groups);
  return `${hex(groups.slice(0, best.at))}::${hex(groups.slice(best.at + best.length))}`;
}

/** An address literal in any spelling: its version and bytes, or null for a name. */
export function addressOf(host: string): { version: 4 | 6; bytes: number[] } | null {
  const v6 = parseIPv6(host);
  if (v6) return { version: 6, bytes: v6 };
  const v4 = parseIPv4(host);
  return v4 ? { version: 4, bytes: v4 } : null;
}

const V4_FLOOR: readonly { net: number[]; bits: number; rule: string; what: string }[] = [
  { net: [0, 0, 0, 0], bits: 8, rule: 'floor.unspecified', what: 'an unspecified address (0.0.0.0/8)' },
  { net: [127, 0, 0, 0], bits: 8, rule: 'floor.loopback', what: 'a loopback address (127.0.0.0/8)' },
  { net: [10, 0, 0, 0], bits: 8, rule: 'floor.private', what: 'a private address (10.0.0.0/8)' },
  { net: [172, 16, 0, 0], bits: 12, rule: 'floor.private', what: 'a private address (172.16.0.0/12)' },
  { net: [192, 168, 0, 0], bits: 16, rule: 'floor.private', what: 'a private address (192.168.0.0/16)' },
  { net: [100, 64, 0, 0], bits: 10, rule: 'floor.cgnat', what: 'a carrier-grade NAT address (100.64.0.0/10)' },
  {
    net: [169, 254, 0, 0],
    bits: 16,
    rule: 'floor.link-local',
    what: 'a link-local address (169.254.0.0/16, where cloud metadata services answer)',
  },
  {
    net: [168, 63, 129, 16],
    bits: 32,
    rule: 'floor.metadata',
    what: "Azure's metadata and DNS address (168.63.129.16)",
  },
  { net: [192, 0, 0, 0], bits: 24, rule: 'floor.reserved', what: 'an IETF protocol address (192.0.0.0/24)' },
  { net: [198, 18, 0, 0], bits: 15, rule: 'floor.reserved', what: 'a benchmarking address (198.18.0.0/15)' },
  { net: [224, 0, 0, 0], bits: 4, rule: 'floor.multicast', what: 'a multicast address (224.0.0.0/4)' },
  { net: [240, 0, 0, 0], bits: 4, rule: 'floor.reserved', what: 'a reserved address (240.0.0.0/4)' },
];

const V6_FLOOR: readonly { net: number[]; bits: number; rule: string; what: string }[] = [
  { net: Array(16).fill(0), bits: 128, rule: 'floor.unspecified', what: 'the unspecified address (::)' },
  { net: [...Array(15).fill(0), 1], bits: 128, rule: 'floor.loopback', what: 'the loopback address (::1)' },
  { net: [0xfe, 0x80], bits: 10, rule: 'floor.link-local', what: 'a link-local address (fe80::/10)' },
  {
    net: [0xfc],
    bits: 7,
    rule: 'floor.unique-local',
    what: 'a unique-local address (fc00::/7, fd00:ec2::254 among them)',
  },
  { net: [0xfe, 0xc0], bits: 10, rule: 'floor.site-local', what: 'a site-local address (fec0::/10, deprecated)' },
  { net: [0xff], bits: 8, rule: 'floor.multicast', what: 'a multicast address (ff00::/8)' },
  {
    net: [0, 0x64, 0xff, 0x9b, 0, 1],
    bits: 48,
    rule: 'floor.nat64-local',
    what: 'a local-use NAT64 address (64:ff9b:1::/48, which may carry any IPv4 address in any of its bytes)',
  },
];

function within(bytes: number[], net: number[], bits: number): boolean {
  for (let bit = 0; bit < bits; bit++) {
    const byte = Math.floor(bit / 8);
    const mask = 0x80 >> (bit % 8);
    if (((bytes[byte] ?? 0) & mask) !== ((net[byte] ?? 0) & mask)) return false;
  }
  return true;
}

/** The IPv4 addresses an IPv6 address carries: mapped, translated, compatible, NAT64, 6to4, Teredo. */
export function embeddedIPv4(bytes: number[]): number[][] {
  const found: number[][] = [];
  const last4 = bytes.slice(12, 16);
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0);
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated)
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) found.push(last4);
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) found.push(last4);
  // ::a.b.c.d (compatible, deprecated but still routed by some stacks)
  if (zeros(0, 12)) found.push(last4);
  // 64:ff9b::/96 (NAT64); local-use 64:ff9b:1::/48 is below the floor whole (see V6_FLOOR)
  if (within(bytes, [0, 0x64, 0xff, 0x9b], 32)) found.push(last4);
  // 2002:AABB:CCDD::/16 (6to4)
  if (bytes[0] === 0x20 && bytes[1] === 0x02) found.push(bytes.slice(2, 6));
  // 2001:0::/32 (Teredo): the client's address, inverted, in the last four bytes
  if (bytes[0] === 0x20 && bytes[1] === 0x01 && bytes[2] === 0 && bytes[3] === 0) {
    found.push(last4.map((byte) => byte ^ 0xff));
  }
  return found;
}

function shown(address: { version: 4 | 6; bytes: number[] }): string {
  if (address.version === 4) return address.bytes.join('.');
  const groups: string[] = [];
  for (let index = 0; index < 16; index += 2)
    groups.push((((address.bytes[index] as number) << 8) | (address.bytes[index + 1] as number)).toString(16));
  return groups.join(':');
}

/** Whether an address (bytes of either version) is below the floor, and by which rule. */
export function checkAddress(address: { version: 4 | 6; bytes: number[] }): FloorVerdict {
  const v4s = address.version === 4 ? [address.bytes] : embeddedIPv4(address.bytes);
  if (address.version === 6) {
    for (const range of V6_FLOOR) {
      if (within(address.bytes, range.net, range.bits)) {
        return { ok: false, rule: range.rule, reason: `${shown(address)} is ${range.what}` };
      }
    }
  }
  for (const v4 of v4s) {
    for (const range of V4_FLOOR) {
      if (within(v4, range.net, range.bits)) {
        const carried = address.version === 6 ? ` (it carries ${v4.join('.')})` : '';
        const what = address.version === 6 ? range.what.replace(/^an? /, 'an address that carries ') : range.what;
        return {
          ok: false,
          rule: range.rule,
          reason: `${shown(address)} is ${address.version === 6 ? `${what}${carried}` : what}`,
        };
      }
    }
  }
  return { ok: true };
}

/** Names that mean the metadata service or this machine, whatever they resolve to. */
const FLOOR_NAMES: readonly { pattern: RegExp; rule: string; what: string }[] = [
  { pattern: /^metadata\.google\.internal$/, rule: 'floor.metadata', what: "Google Cloud's metadata service" },
  { pattern: /^metadata(\.goog)?$/, rule: 'floor.metadata', what: 'a cloud metadata service' },
  { pattern: /^(.+\.)?localhost$/, rule: 'floor.loopback', what: 'this machine' },
];

/**
 * A host as the proxy checks it: lower case, no trailing dot, no user part, no brackets.
 * `u@host` is `host`; `ALLOWED.COM.` is `allowed.com`.
 */
export function normalHost(host: string): string {
  let name = host.trim().toLowerCase();
  const at = name.lastIndexOf('@');
  if (at >= 0) name = name.slice(at + 1);
  while (name.endsWith('.')) name = name.slice(0, -1);
  return name;
}

/** Whether a host (a name or an address literal in any spelling) is below the floor before anything resolves it. */
export function checkHost(host: string): FloorVerdict {
  const name = normalHost(host);
  const address = addressOf(name);
  if (address) return checkAddress(address);
  for (const entry of FLOOR_NAMES) {
    if (entry.pattern.test(name)) return { ok: false, rule: entry.rule, reason: `${name} is ${entry.what}` };
  }
  return { ok: true };
}
