import { Sandbox, lua, lauxlib, to_luastring } from './runtime/lua/vm';
const sb = new Sandbox({ source: { read: () => null }, baseDir: '' });
const L = sb.L;
const code = `
local ents = {}
for i=1,2000 do ents["npc-"..i] = {type="npc", x=math.random(0,999), y=math.random(0,999)} end
function step()
  for id, e in pairs(ents) do
    if e.type == "npc" then
      e.x = math.max(0, math.min(999, e.x + math.random(-1, 1)))
      e.y = math.max(0, math.min(999, e.y + math.random(-1, 1)))
    end
  end
end`;
if (lauxlib.luaL_dostring(L, to_luastring(code)) !== 0) throw new Error(lua.lua_tojsstring(L, -1));
const round = () => { sb.remaining = 1e12; sb.deadline = Date.now() + 1e6; lua.lua_getglobal(L, to_luastring('step')); lua.lua_call(L, 0, 0); };
for (let i = 0; i < 100; i++) round();
const res: number[] = [];
for (let k = 0; k < 7; k++) {
  const t0 = performance.now();
  for (let i = 0; i < 100; i++) round();
  res.push((performance.now() - t0) / 100);
}
res.sort((a, b) => a - b);
console.log('ms per step (2000 npcs): min', res[0].toFixed(3), 'median', res[3].toFixed(3));
import { Session } from 'node:inspector/promises';
if (process.env.ALLOC) {
  const s = new Session(); s.connect();
  await s.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  for (let i = 0; i < 100; i++) round();
  const { profile } = await s.post('HeapProfiler.stopSampling');
  const by = new Map<string, number>();
  const walk = (n: any) => { const k = `${n.callFrame.functionName} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`; by.set(k, (by.get(k) ?? 0) + n.selfSize); n.children.forEach(walk); };
  walk(profile.head);
  let total = 0; for (const v of by.values()) total += v;
  console.log('KB per step', (total / 100 / 1024).toFixed(1));
  for (const [k, v] of [...by].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log((v / 100 / 1024).toFixed(1).padStart(8), k);
}
