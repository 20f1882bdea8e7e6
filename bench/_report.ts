// What a benchmark prints: progress lines on stderr while it runs, tables on stdout at the end.

const benchStarted = performance.now();

/** One progress line on stderr while a benchmark runs (the tables go to stdout at the end). */
export function progress(message: string): void {
  process.stderr.write(`[${((performance.now() - benchStarted) / 1000).toFixed(0).padStart(4)} s] ${message}\n`);
}

export function table(title: string, head: string[], rows: (string | number)[][]): void {
  console.log(`\n${title}\n`);
  console.log(`| ${head.join(' | ')} |`);
  console.log(`|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`);
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}
