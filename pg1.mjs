import { PGlite } from '@electric-sql/pglite';
const t=Date.now();
const db = new PGlite();
await db.waitReady;
console.log('start ms', Date.now()-t);
const r = await db.query("select 1::int8 as a, now() as b, '{\"x\":1}'::jsonb as c, $1::jsonb as d", [JSON.stringify({y:2})]);
console.log(r.rows, typeof r.rows[0].a);
const t2=Date.now(); const dump = await db.dumpDataDir('none'); console.log('dump', Date.now()-t2, dump.size);
const t3=Date.now(); const db2 = new PGlite({loadDataDir: dump}); await db2.waitReady; console.log('load', Date.now()-t3);
