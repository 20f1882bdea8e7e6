import pg from 'pg';

/**
 * Honest clients that keep writing while a fault test (or the outage soak)
 * breaks the database: each sends direct messages with contents unique to the
 * run, remembers which ones the node acknowledged, and how every request went.
 */
export interface WriterStats {
  /** Contents the node answered 200 for: each must be stored exactly once. */
  acked: string[];
  byStatus: Map<number, number>;
  /** Error codes (and reasons) of non-200 answers, e.g. `503 not_ready/database_unavailable`. */
  errors: Map<string, number>;
  longestMs: number;
  /** Requests that got no HTTP answer at all (socket error or our own client timeout). */
  unanswered: number;
  requests: number;
  /** When the last acknowledgement came, ms since epoch. */
  lastAckAt: number;
}

export interface WriterOptions {
  url: string;
  /** Sender tokens, one writer each (round-robin if fewer). */
  tokens: string[];
  recipientId: string;
  writers: number;
  tag: string;
  /** A request still unanswered after this long counts as unanswered (the node must never hang). */
  clientTimeoutMs?: number;
  /** Pause between one writer's requests. */
  pauseMs?: number;
}

export function startWriters(options: WriterOptions): { stats: WriterStats; stop(): Promise<WriterStats> } {
  const stats: WriterStats = { acked: [], byStatus: new Map(), errors: new Map(), longestMs: 0, unanswered: 0, requests: 0, lastAckAt: 0 };
  let running = true;
  const loops = Array.from({ length: options.writers }, async (_, w) => {
    const token = options.tokens[w % options.tokens.length]!;
    for (let n = 0; running; n++) {
      const content = `${options.tag}-${w}-${n}`;
      const started = Date.now();
      stats.requests++;
      try {
        const res = await fetch(`${options.url}/api/v1/dm`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ recipient_id: options.recipientId, content }),
          signal: AbortSignal.timeout(options.clientTimeoutMs ?? 15_000),
        });
        const text = await res.text();
        stats.byStatus.set(res.status, (stats.byStatus.get(res.status) ?? 0) + 1);
        if (res.status === 200) {
          stats.acked.push(content);
          stats.lastAckAt = Date.now();
        } else {
          let key = `${res.status} ?`;
          try {
            const e = JSON.parse(text).error;
            key = `${res.status} ${e.code}${e.details?.reason ? '/' + e.details.reason : ''}`;
          } catch {
            /* counted as unparsed */
          }
          stats.errors.set(key, (stats.errors.get(key) ?? 0) + 1);
        }
      } catch {
        stats.unanswered++;
      }
      stats.longestMs = Math.max(stats.longestMs, Date.now() - started);
      if (options.pauseMs) await new Promise((r) => setTimeout(r, options.pauseMs));
    }
  });
  return {
    stats,
    async stop() {
      running = false;
      await Promise.all(loops);
      return stats;
    },
  };
}

/** How many times each acknowledged content is stored: lost ones (0) and duplicates (>1). */
export async function auditAcked(url: string, schema: string | undefined, acked: string[]): Promise<{ lost: string[]; duplicated: string[] }> {
  const client = new pg.Client({ connectionString: url, ...(schema ? { options: `-c search_path=${schema}` } : {}) });
  await client.connect();
  try {
    const { rows } = await client.query<{ content: string; n: string }>(
      'select content, count(*) as n from chat_messages where content = any($1::text[]) group by content',
      [acked],
    );
    const counts = new Map(rows.map((r) => [r.content, Number(r.n)]));
    return {
      lost: acked.filter((c) => !counts.has(c)),
      duplicated: [...counts].filter(([, n]) => n > 1).map(([c]) => c),
    };
  } finally {
    await client.end();
  }
}
