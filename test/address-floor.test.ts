/**
 * The address floor holds in every spelling: IPv4 as inet_aton reads it, IPv6 as itself
 * and as every IPv4 address it carries, the metadata names, and a host's user part or
 * trailing dot; and only the host's own environment lifts it.
 */
import { describe, expect, it } from 'vitest';
import {
  checkHost,
  floorLifted,
  normalHost,
  parseIPv4,
  parseIPv6,
} from '../dist/runtime/exec/containment/address-floor.js';

describe('the address floor', () => {
  it('reads IPv4 addresses the way the C library does', () => {
    expect(parseIPv4('127.1')).toEqual([127, 0, 0, 1]);
    expect(parseIPv4('0x7f.1')).toEqual([127, 0, 0, 1]);
    expect(parseIPv4('2130706433')).toEqual([127, 0, 0, 1]);
    expect(parseIPv4('0177.0.0.01')).toEqual([127, 0, 0, 1]);
    expect(parseIPv4('0x7f000001')).toEqual([127, 0, 0, 1]);
    expect(parseIPv4('10.0.258')).toEqual([10, 0, 1, 2]);
    expect(parseIPv4('256.1.1.1')).toBeNull();
    expect(parseIPv4('1.2.3.4.5')).toBeNull();
    expect(parseIPv4('example.com')).toBeNull();
    expect(parseIPv4('09.1.1.1')).toBeNull();
  });

  it('refuses loopback, metadata, private and the rest, in every spelling and every IPv6 embedding', () => {
    const refused: Record<string, string> = {
      '0x7f.1': 'floor.loopback',
      '127.1': 'floor.loopback',
      '2130706433': 'floor.loopback',
      '0177.0.0.1': 'floor.loopback',
      '[::1]': 'floor.loopback',
      '::ffff:127.0.0.1': 'floor.loopback',
      '::ffff:7f00:1': 'floor.loopback',
      '::127.0.0.1': 'floor.loopback',
      '64:ff9b::a9fe:a9fe': 'floor.link-local',
      '2002:a9fe:a9fe::1': 'floor.link-local',
      '2001:0:4136:e378:8000:63bf:5601:5601': 'floor.link-local',
      '169.254.169.254': 'floor.link-local',
      '0xa9.0xfe.0xa9.0xfe': 'floor.link-local',
      'fd00:ec2::254': 'floor.unique-local',
      '[fe80::1%eth0]': 'floor.link-local',
      '168.63.129.16': 'floor.metadata',
      'metadata.google.internal': 'floor.metadata',
      'METADATA.GOOGLE.INTERNAL.': 'floor.metadata',
      '10.1.2.3': 'floor.private',
      '172.20.0.1': 'floor.private',
      '192.168.1.1': 'floor.private',
      '100.64.0.1': 'floor.cgnat',
      '0.0.0.0': 'floor.unspecified',
      '0': 'floor.unspecified',
      '[::]': 'floor.unspecified',
      '224.0.0.1': 'floor.multicast',
      'ff02::1': 'floor.multicast',
      localhost: 'floor.loopback',
      'api.localhost': 'floor.loopback',
      'user@127.0.0.1': 'floor.loopback',
    };
    for (const [host, rule] of Object.entries(refused)) {
      const verdict = checkHost(host);
      expect(verdict, host).toMatchObject({ ok: false, rule });
    }
  });

  it('lets public addresses and names through, and normalises what a host may be spelled as', () => {
    for (const host of ['93.184.216.34', '2606:4700::1111', 'example.com', 'allowed.com.evil.com', '172.32.0.1']) {
      expect(checkHost(host), host).toEqual({ ok: true });
    }
    expect(normalHost('ALLOWED.COM.')).toBe('allowed.com');
    expect(normalHost('u@allowed.com')).toBe('allowed.com');
    expect(parseIPv6('::ffff:10.0.0.1')?.slice(12)).toEqual([10, 0, 0, 1]);
  });

  it('is lifted only by IO_HARNESS_ALLOW_LOCAL_ADDRESSES=1 in the host environment', () => {
    expect(floorLifted({})).toBe(false);
    expect(floorLifted({ IO_HARNESS_ALLOW_LOCAL_ADDRESSES: 'true' })).toBe(false);
    expect(floorLifted({ IO_HARNESS_ALLOW_LOCAL_ADDRESSES: '1' })).toBe(true);
  });
});
