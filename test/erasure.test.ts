import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../runtime/platform/database';
import { erasableColumns } from '../runtime/changes/erasure';
import { registerPlayer, type TestPlayer } from './support/accounts';
import { startTestServer, type TestServer } from './support/server';

/**
 * Erasure completeness against the live schema: every column of every table
 * with a foreign key to `players` must be registered with runtime/platform/erasure.ts,
 * and a self-erase must leave no row pointing at the player. Rows are
 * fabricated generically from the catalog, so tables added by later
 * migrations are covered without touching this file — unless a CHECK
 * constraint refuses the fabricated values; then add the values here.
 */
const FIXTURES: Record<string, Record<string, unknown>> = {};
/** Columns an erasure keeps, with the player reference set to null: receipts and group creators. */
const KEPT_SEVERED = ['iap_transactions.player_id', 'groups.creator_id'];

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

interface ForeignKey {
  table: string;
  column: string;
  refTable: string;
  refColumn: string;
}
interface ColumnInfo {
  column_name: string;
  data_type: string;
  is_nullable: 'YES' | 'NO';
  column_default: string | null;
  character_maximum_length: number | null;
}
type Row = Record<string, unknown>;

async function foreignKeys(db: Db, where: { to?: string; from?: string }): Promise<ForeignKey[]> {
  const result = await sql<ForeignKey>`
    select src.relname as "table", a.attname as "column", dst.relname as "refTable", ra.attname as "refColumn"
    from pg_constraint c
    join pg_class src on src.oid = c.conrelid
    join pg_class dst on dst.oid = c.confrelid
    join pg_namespace n on n.oid = src.relnamespace
    join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
    join pg_attribute ra on ra.attrelid = c.confrelid and ra.attnum = c.confkey[1]
    where c.contype = 'f' and n.nspname = current_schema()
      ${where.to ? sql`and dst.relname = ${where.to}` : sql``}
      ${where.from ? sql`and src.relname = ${where.from}` : sql``}
    order by 1, 2`.execute(db);
  return result.rows;
}

async function columns(db: Db, table: string): Promise<ColumnInfo[]> {
  const result = await sql<ColumnInfo>`
    select column_name, data_type, is_nullable, column_default, character_maximum_length
    from information_schema.columns
    where table_schema = current_schema() and table_name = ${table}
    order by ordinal_position`.execute(db);
  return result.rows;
}

async function primaryKey(db: Db, table: string): Promise<string[]> {
  const result = await sql<{ name: string }>`
    select a.attname as name from pg_index i
    join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
    where i.indrelid = ${table}::regclass and i.indisprimary`.execute(db);
  return result.rows.map((r) => r.name);
}

function sample(c: ColumnInfo): unknown {
  const text = () => `f${Math.random().toString(16).slice(2)}`.slice(0, Math.max(1, c.character_maximum_length ?? 24));
  switch (c.data_type) {
    case 'uuid':
      return crypto.randomUUID();
    case 'character varying':
    case 'text':
    case 'character':
      return text();
    case 'integer':
    case 'bigint':
    case 'smallint':
      return 1 + Math.floor(Math.random() * 30_000);
    case 'double precision':
    case 'real':
    case 'numeric':
      return 1.5;
    case 'boolean':
      return false;
    case 'jsonb':
    case 'json':
      return sql`${'{}'}::jsonb`;
    case 'timestamp with time zone':
    case 'timestamp without time zone':
    case 'date':
      return new Date();
    default:
      throw new Error(`cannot fabricate a ${c.data_type} for ${c.column_name}; add a value to FIXTURES`);
  }
}

/**
 * Inserts one row into `table` with `fixed` values; every other required
 * column gets a sample value, a required reference to `players` points at
 * `defaultPlayer`, and a required reference to another table gets a
 * fabricated parent.
 */
async function fabricate(db: Db, table: string, fixed: Row, defaultPlayer: string): Promise<Row> {
  const refs = await foreignKeys(db, { from: table });
  const values: Row = { ...(FIXTURES[table] ?? {}), ...fixed };
  for (const c of await columns(db, table)) {
    if (c.column_name in values || c.is_nullable === 'YES' || c.column_default !== null) continue;
    const ref = refs.find((r) => r.column === c.column_name);
    if (ref?.refTable === 'players') values[c.column_name] = defaultPlayer;
    else if (ref) values[c.column_name] = (await fabricate(db, ref.refTable, {}, defaultPlayer))[ref.refColumn];
    else values[c.column_name] = sample(c);
  }
  const names = Object.keys(values);
  const result = await sql<Row>`
    insert into ${sql.table(table)} (${sql.join(names.map((n) => sql.ref(n)))})
    values (${sql.join(names.map((n) => values[n]))})
    returning *`.execute(db);
  return result.rows[0]!;
}

async function stillThere(db: Db, table: string, row: Row): Promise<Row | undefined> {
  const pk = await primaryKey(db, table);
  let query = db.selectFrom(table as 'players').selectAll();
  for (const k of pk) query = query.where(k as 'id', '=', row[k] as string);
  return (await query.executeTakeFirst()) as Row | undefined;
}

describe('erasure completeness', () => {
  let victim: TestPlayer;
  let bystander: TestPlayer;
  let references: ForeignKey[];

  beforeAll(async () => {
    victim = await registerPlayer(s);
    bystander = await registerPlayer(s);
    references = await foreignKeys(s.ctx.db, { to: 'players' });
  });

  it('finds the accounts tables among the references (the catalog query works)', () => {
    const names = references.map((r) => `${r.table}.${r.column}`);
    expect(names).toEqual(expect.arrayContaining(['player_identities.player_id', 'player_tokens.user_id', 'player_stats.player_id']));
  });

  it('has every column that references players registered, and every registration real', async () => {
    const registered = erasableColumns();
    const missing = references.filter((r) => !registered.some((e) => !e.via && e.table === r.table && e.column === r.column));
    expect(missing.map((r) => `${r.table}.${r.column}`), 'columns referencing players but not registered in runtime/platform/erasure.ts').toEqual([]);

    // Spec 4.2 rule 3 / 4.14: receipts and the group creator reference are kept, severed.
    for (const kept of references.filter((r) => KEPT_SEVERED.includes(`${r.table}.${r.column}`))) {
      expect(registered.find((e) => e.table === kept.table && e.column === kept.column)?.mode, `${kept.table}.${kept.column}`).toBe('nullify');
    }

    for (const e of registered) {
      const cols = await columns(s.ctx.db, e.table);
      const col = cols.find((c) => c.column_name === e.column);
      expect(col, `registered ${e.table}.${e.column} does not exist`).toBeDefined();
      if (e.mode === 'nullify') expect(col!.is_nullable, `${e.table}.${e.column} is nullified but NOT NULL`).toBe('YES');
      if (e.via) {
        const parent = await foreignKeys(s.ctx.db, { from: e.table });
        expect(parent.some((f) => f.column === e.column && f.refTable === e.via!.table), `${e.table}.${e.column} does not reference ${e.via.table}`).toBe(true);
      }
    }
  });

  it('leaves no row pointing at the erased player, keeps nullified rows, and touches nobody else', async () => {
    const db = s.ctx.db;
    const registered = erasableColumns();
    const fabricated: { table: string; column: string; mode: 'delete' | 'nullify'; mine: Row | null; theirs: Row | null }[] = [];
    for (const ref of references) {
      const entry = registered.find((e) => !e.via && e.table === ref.table && e.column === ref.column)!;
      const otherColumns = references.filter((r) => r.table === ref.table && r.column !== ref.column).map((r) => r.column);
      const make = async (owner: string) => {
        const rows = (await db
          .selectFrom(ref.table as 'players')
          .selectAll()
          .where(ref.column as 'id', '=', owner)
          .execute()) as Row[];
        // Rows the API already made (tokens, stats) count, since a second one may
        // violate a key; but not one that also points at the victim elsewhere.
        const existing = rows.find((row) => otherColumns.every((c) => row[c] !== victim.player_id));
        return existing ?? fabricate(db, ref.table, { [ref.column]: owner }, bystander.player_id);
      };
      fabricated.push({ table: ref.table, column: ref.column, mode: entry.mode, mine: await make(victim.player_id), theirs: await make(bystander.player_id) });
    }

    // One level further: rows that hang off a row the erasure deletes.
    const children: { table: string; parent: string; mine: Row; theirs: Row }[] = [];
    for (const f of fabricated.filter((x) => x.mode === 'delete')) {
      for (const child of await foreignKeys(db, { to: f.table })) {
        if (child.table === f.table) continue;
        const mine = await fabricate(db, child.table, { [child.column]: f.mine![child.refColumn] }, bystander.player_id);
        const theirs = await fabricate(db, child.table, { [child.column]: f.theirs![child.refColumn] }, bystander.player_id);
        children.push({ table: child.table, parent: f.table, mine, theirs });
      }
    }

    const res = await s.call('POST', '/api/v1/players/me/erase', { token: victim.access_token, body: { password: victim.password } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);

    for (const ref of references) {
      const left = await db
        .selectFrom(ref.table as 'players')
        .select(sql<number>`count(*)::int`.as('n'))
        .where(ref.column as 'id', '=', victim.player_id)
        .executeTakeFirstOrThrow();
      expect(left.n, `${ref.table}.${ref.column} still holds the erased player`).toBe(0);
    }
    for (const f of fabricated) {
      const mine = await stillThere(db, f.table, f.mine!);
      if (f.mode === 'delete') expect(mine, `${f.table} row of the erased player`).toBeUndefined();
      else expect(mine?.[f.column], `${f.table}.${f.column} kept with the reference nulled`).toBeNull();
      expect(await stillThere(db, f.table, f.theirs!), `${f.table} row of another player`).toBeDefined();
    }
    for (const c of children) {
      expect(await stillThere(db, c.table, c.mine), `${c.table} row under an erased ${c.parent} row`).toBeUndefined();
      expect(await stillThere(db, c.table, c.theirs), `${c.table} row of another player`).toBeDefined();
    }
    expect(await db.selectFrom('players').select('id').where('id', '=', victim.player_id).executeTakeFirst()).toBeUndefined();
    expect(await db.selectFrom('players').select('id').where('id', '=', bystander.player_id).executeTakeFirst()).toBeDefined();
  });
});
