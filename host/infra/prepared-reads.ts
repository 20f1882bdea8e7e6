import type { PGlite } from '@electric-sql/pglite';

/**
 * Reads the embedded database runs as named prepared statements, one round
 * of the wire protocol for many executions (decision 0064).
 *
 * PGlite's `query` sends Parse, Describe, Bind, Describe, Execute and Sync
 * as six calls into the WebAssembly backend, and parses and plans the text
 * every time: a one-row indexed read costs 650-750 µs of CPU with the memory
 * saver on, where executing a statement parsed once costs about 110 µs. A
 * read kept here is parsed once per backend; each call is one Bind and
 * Execute per parameter list and one Sync, in a single call into the
 * backend. Parameters go as text; rows come back as `query` returns them,
 * through the instance's own type parsers.
 */
export type PreparedRead = (text: string, parameterLists: readonly (readonly unknown[])[]) => Promise<Record<string, unknown>[][]>;

interface Statement {
  name: string;
  /** Result columns from the statement's description, with each one's parser. */
  columns: { name: string; parse: (value: string) => unknown }[];
}

interface Field {
  name: string;
  dataTypeID: number;
}

/** Backend messages as PGlite's protocol parser hands them over (`execProtocolStream`). */
type BackendMessage =
  | { name: 'rowDescription'; fields: Field[] }
  | { name: 'dataRow'; fields: (string | null)[] }
  | { name: 'commandComplete' }
  | { name: string };

/** Statement names are unique in the process: a backend the test suite hands on may still hold an earlier handle's. */
let named = 0;

/**
 * `exclusive` runs the round while no other statement can: the node's
 * serial connection held (a transaction owns it from BEGIN to COMMIT), as
 * every kysely statement holds it.
 */
export function preparedReads(lite: PGlite, exclusive: <T>(work: () => Promise<T>) => Promise<T>): PreparedRead {
  const statements = new Map<string, Statement>();
  /** Names given up after a failed round, closed at the start of the next so failures do not pile statements up in the backend. */
  let abandoned: string[] = [];
  return (text, parameterLists) =>
    exclusive(() =>
      lite.runExclusive(async () => {
        const known = statements.get(text);
        const name = known?.name ?? `svc_read_${++named}`;
        const out = new Wire();
        for (const old of abandoned) out.close(old);
        abandoned = [];
        if (!known) {
          out.parse(name, text);
          out.describe(name);
        }
        for (const parameters of parameterLists) {
          out.bind(name, parameters);
          out.execute();
        }
        out.sync();
        let messages: BackendMessage[];
        try {
          messages = (await lite.execProtocolStream(out.bytes(), { syncToFs: false })) as BackendMessage[];
        } catch (err) {
          // Whatever failed (the statement deallocated under us, a plan whose result changed), the next call parses it afresh.
          statements.delete(text);
          abandoned.push(name);
          throw err;
        }
        let statement = known;
        const results: Record<string, unknown>[][] = [];
        let rows: Record<string, unknown>[] = [];
        for (const message of messages) {
          if (message.name === 'rowDescription' && !statement) {
            statement = { name, columns: (message as { fields: Field[] }).fields.map((f) => column(lite, f)) };
            statements.set(text, statement);
          } else if (message.name === 'dataRow') {
            const values = (message as { fields: (string | null)[] }).fields;
            const row: Record<string, unknown> = {};
            statement!.columns.forEach((c, i) => (row[c.name] = values[i] === null ? null : c.parse(values[i]!)));
            rows.push(row);
          } else if (message.name === 'commandComplete') {
            results.push(rows);
            rows = [];
          }
        }
        if (!statement) throw new Error('prepared read: the statement returns no rows');
        return results;
      }),
    );
}

function column(lite: PGlite, field: Field): Statement['columns'][number] {
  const parser = lite.parsers[field.dataTypeID];
  return { name: field.name, parse: parser ? (value) => parser(value, field.dataTypeID) : (value) => value };
}

/** A parameter in PostgreSQL's text format: timestamps in ISO 8601, arrays as array literals. */
function textOf(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return `{${value.map((v) => (v === null || v === undefined ? 'NULL' : `"${textOf(v).replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`;
  return String(value);
}

/** Frontend messages of the extended protocol, written into one buffer. */
class Wire {
  #buf = Buffer.allocUnsafe(1024);
  #at = 0;

  parse(name: string, text: string): void {
    this.#begin(0x50);
    this.#cstring(name);
    this.#cstring(text);
    this.#int16(0);
    this.#end();
  }

  /** Closing a statement that does not exist is no error. */
  close(name: string): void {
    this.#begin(0x43);
    this.#byte(0x53);
    this.#cstring(name);
    this.#end();
  }

  describe(name: string): void {
    this.#begin(0x44);
    this.#byte(0x53);
    this.#cstring(name);
    this.#end();
  }

  /** Every parameter as text (format code 0), every result column as text. */
  bind(name: string, parameters: readonly unknown[]): void {
    this.#begin(0x42);
    this.#cstring('');
    this.#cstring(name);
    this.#int16(0);
    this.#int16(parameters.length);
    for (const p of parameters) {
      if (p === null || p === undefined) {
        this.#int32(-1);
        continue;
      }
      const value = textOf(p);
      const length = Buffer.byteLength(value);
      this.#int32(length);
      this.#room(length);
      this.#at += this.#buf.write(value, this.#at);
    }
    this.#int16(0);
    this.#end();
  }

  execute(): void {
    this.#begin(0x45);
    this.#cstring('');
    this.#int32(0);
    this.#end();
  }

  sync(): void {
    this.#begin(0x53);
    this.#end();
  }

  bytes(): Uint8Array {
    return this.#buf.subarray(0, this.#at);
  }

  #start = 0;

  #begin(type: number): void {
    this.#byte(type);
    this.#start = this.#at;
    this.#int32(0);
  }

  /** Fills in the length of the message begun last (it counts itself, not the type byte). */
  #end(): void {
    this.#buf.writeInt32BE(this.#at - this.#start, this.#start);
  }

  #cstring(s: string): void {
    const length = Buffer.byteLength(s);
    this.#room(length + 1);
    this.#at += this.#buf.write(s, this.#at);
    this.#buf[this.#at++] = 0;
  }

  #byte(b: number): void {
    this.#room(1);
    this.#buf[this.#at++] = b;
  }

  #int16(n: number): void {
    this.#room(2);
    this.#at = this.#buf.writeInt16BE(n, this.#at);
  }

  #int32(n: number): void {
    this.#room(4);
    this.#at = this.#buf.writeInt32BE(n, this.#at);
  }

  #room(n: number): void {
    if (this.#at + n <= this.#buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#at + n));
    this.#buf.copy(bigger, 0, 0, this.#at);
    this.#buf = bigger;
  }
}
