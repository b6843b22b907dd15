/** A throwaway PostgreSQL cluster (see pg-cluster.mjs). */
export interface Cluster {
  url: string;
  stop(): void;
}
export function startCluster(options?: { prefix?: string; settings?: Record<string, string> }): Promise<Cluster>;
