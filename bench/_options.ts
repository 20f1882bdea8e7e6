// How a benchmark reads its `--name value` options from the command line.

/** The number after `--name`, or `fallback` when the option is absent. */
export function numberOption(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

/** The comma-separated names after `--name`, or null when the option is absent. */
export function listOption(name: string): string[] | null {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? '').split(',').filter(Boolean) : null;
}
