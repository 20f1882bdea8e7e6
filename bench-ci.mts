import { Sandbox, lua, lauxlib, to_luastring } from './runtime/lua/vm';
const sb = new Sandbox({ source: { read: () => null }, baseDir: '' });
const L = sb.L;
sb.remaining = 1e12; sb.deadline = Date.now() + 1e6;
const code = `
local out = {}
local function add(...) for _, v in ipairs({...}) do out[#out+1] = tostring(v) end end
-- coroutines yielding through pcall and from nested calls
local co = coroutine.wrap(function(a)
  local ok, v = pcall(function() local x = coroutine.yield(a + 1); error("boom" .. x) end)
  add(ok, v)
  local y = coroutine.yield(select("#", table.unpack({1,2,3})))
  for i = 1, 3 do y = y + coroutine.yield(i) end
  return "done", y
end)
add(co(1)); add(co(5)); add(co(7)); add(co(1)); add(co(2)); add(co(3))
-- deep recursion overflow, then normal calls
local function deep(n) return deep(n + 1) + 1 end
local ok, err = pcall(deep, 1); add(ok, (tostring(err):gsub("^.-:%d+: ", "")))
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
add(fib(20))
-- C calling Lua: sort with comparator, gsub with function, xpcall with traceback handler
local t = {5, 3, 9, 1, 7}; table.sort(t, function(a, b) return a > b end); add(table.concat(t, ","))
add((("a1b2c3"):gsub("%d", function(d) return "<" .. d * 2 .. ">" end)))
add(xpcall(function() local z = nil; return z.x end, function(m) return "handled:" .. tostring(m):sub(-20) end))
-- error inside a JS function called from Lua inside pcall, then more JS calls
add(pcall(math.max)); add(math.max(1, 2.5, -3), math.min(4, 2, 8), math.max(3), math.type(math.max(1, 2)))
add(select(2, pcall(string.rep)))
-- tail calls and varargs
local function tc(n, acc) if n == 0 then return acc end return tc(n - 1, acc + n) end
add(tc(10000, 0))
local function va(...) return select("#", ...), ... end
add(va(1, nil, 3))
-- many calls after unwinding
local s = 0; for i = 1, 1000 do s = s + math.abs(-i) end; add(s)
local co2 = coroutine.create(function() for i = 1, 3 do coroutine.yield(string.format("%d", i)) end error("end") end)
for i = 1, 5 do add(coroutine.resume(co2)) end
return table.concat(out, "|")`;
if (lauxlib.luaL_dostring(L, to_luastring(code)) !== 0) throw new Error(lua.lua_tojsstring(L, -1));
console.log(lua.lua_tojsstring(L, -1));
