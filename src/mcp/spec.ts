/**
 * What an MCP server is, as the embedder writes it, and the check of that shape. Apart from
 * the client so the supervisor can refuse a bad spec when run() is called without loading
 * the protocol's SDK (only a tree that has servers loads it).
 */

import { InvalidArgumentError } from '../errors.js';

/** A server started as a child process, spoken to over its stdin and stdout. */
export interface McpStdioServer {
  /** Letters, digits, `_` and `-` (no `__`), at most 30: the prefix of its tools' names. */
  name: string;
  /** The bundle that brought it (see Config): its name is then `<bundle>__<server>`, that `__` the namespace. */
  bundle?: string;
  /** The program and its arguments. */
  command: string[];
  /** Its environment: only what you give here, beside PATH, HOME and the like (no provider key of yours). */
  env?: Record<string, string>;
  cwd?: string;
}

/** A server dialled over streamable HTTP. */
export interface McpHttpServer {
  name: string;
  /** See {@link McpStdioServer.bundle}. */
  bundle?: string;
  url: string;
  headers?: Record<string, string>;
  /**
   * The server is on this machine or a private network (loopback, RFC 1918 and the like):
   * its connections may reach an address under the egress proxy's address floor. For this
   * server only; the run's commands keep the floor. Default false.
   */
  allowLocalAddress?: boolean;
}

export type McpServerSpec = McpStdioServer | McpHttpServer;

const SERVER_NAME = /^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$/;
/** A bundle's name, as a server it brought is prefixed with. */
const BUNDLE_NAME = /^[a-z0-9][a-z0-9-]{0,29}$/;

/** The specs checked: each a stdio or HTTP server with a name of its own, or a clear error, prefixed by `where`, naming what is wrong. */
export function checkSpecs(specs: unknown, where = 'McpServers.connect'): McpServerSpec[] {
  if (!Array.isArray(specs))
    throw new InvalidArgumentError(
      `${where} needs an array of MCP servers: { name, command: [...] } or { name, url }.`,
    );
  const seen = new Set<string>();
  return specs.map((spec, index) => {
    const at = `${where}: MCP server ${index}`;
    if (typeof spec !== 'object' || spec === null)
      throw new InvalidArgumentError(`${at}: must be { name, command: [...] } or { name, url }.`);
    const { name, command, url, bundle } = spec as Record<string, unknown>;
    if (bundle !== undefined && (typeof bundle !== 'string' || !BUNDLE_NAME.test(bundle)))
      throw new InvalidArgumentError(
        `${at}: bundle must be a bundle's name (1 to 30 lowercase letters, digits or -), got ${JSON.stringify(bundle)}.`,
      );
    // A bundle's server is <bundle>__<own name>: the one __ is the namespace, the rest is a plain name.
    const own =
      typeof name === 'string' && bundle !== undefined && name.startsWith(`${bundle}__`)
        ? name.slice(String(bundle).length + 2)
        : name;
    if (
      typeof name !== 'string' ||
      typeof own !== 'string' ||
      own.length > 30 ||
      !SERVER_NAME.test(own) ||
      (bundle !== undefined && own === name)
    )
      throw new InvalidArgumentError(
        bundle === undefined
          ? `${at}: name must be 1 to 30 letters, digits, - or single _ (its tools are named <name>__<tool>), got ${JSON.stringify(name)}.`
          : `${at}: a server of the bundle ${bundle} is named ${bundle}__<name>, the name 1 to 30 letters, digits, - or single _; got ${JSON.stringify(name)}.`,
      );
    if (seen.has(name))
      throw new InvalidArgumentError(`${where}: two MCP servers are named ${name}; give each its own name.`);
    seen.add(name);
    if ((command === undefined) === (url === undefined))
      throw new InvalidArgumentError(
        `${where}: MCP server ${name}: give either command (a stdio server) or url (an HTTP one).`,
      );
    if (command !== undefined) {
      if (
        !Array.isArray(command) ||
        command.length === 0 ||
        command.some((part) => typeof part !== 'string' || part === '')
      )
        throw new InvalidArgumentError(
          `${where}: MCP server ${name}: command must be a non-empty array of strings, e.g. ["node", "server.mjs"].`,
        );
    } else {
      let parsed: URL | null = null;
      try {
        parsed = new URL(String(url));
      } catch {
        parsed = null;
      }
      if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
        throw new InvalidArgumentError(
          `${where}: MCP server ${name}: url must be an http or https URL, got ${JSON.stringify(url)}.`,
        );
      const { headers, allowLocalAddress } = spec as Record<string, unknown>;
      if (
        headers !== undefined &&
        (typeof headers !== 'object' ||
          headers === null ||
          Array.isArray(headers) ||
          Object.values(headers).some((value) => typeof value !== 'string'))
      )
        throw new InvalidArgumentError(
          `${where}: MCP server ${name}: headers must be an object of strings, e.g. { authorization: "Bearer ..." }.`,
        );
      if (allowLocalAddress !== undefined && typeof allowLocalAddress !== 'boolean')
        throw new InvalidArgumentError(
          `${where}: MCP server ${name}: allowLocalAddress must be true or false, got ${JSON.stringify(allowLocalAddress)}.`,
        );
    }
    return spec as McpServerSpec;
  });
}
