/**
 * fengari's call path without `delete`.
 *
 * fengari clears every stack slot above the top with `delete L.stack[i]`:
 * on each call (the caller's frame is cut down to the arguments, then the
 * callee's frame is grown with fresh slots) and on each return (the callee's
 * frame is cut down to the results). V8 runs each element `delete` in its
 * runtime, and once a stack array is old and sparse it turns into a
 * dictionary, so every register access becomes a hash lookup. Profiles of
 * the demo arena put more than half of a callback's cost there.
 *
 * These replacements of `adjust_top`, `luaD_precall`, `luaD_poscall`,
 * `luaD_call` and `luaD_callnoyield` are fengari 0.1.5's own code with
 * `stack[i] = undefined` for `delete stack[i]` (a plain store; the slot is
 * equally dead and holds nothing). The interpreter (lvm.js) and the API
 * (lapi.js) reach them through the module object, so installing them once
 * covers every state. Rare paths (vararg functions, `__call`, call and
 * return hooks, C-stack overflow) go to the originals unchanged.
 */
import ldo from 'fengari/src/ldo.js';
import lobject from 'fengari/src/lobject.js';
import lstate from 'fengari/src/lstate.js';
import lvm from 'fengari/src/lvm.js';

const { TValue, setobjs2s } = lobject;

const LUA_TNIL = 0;
const LUA_TLCL = 6;
const LUA_TLCF = 6 | (1 << 4);
const LUA_TCCL = 6 | (2 << 4);
const LUA_MULTRET = -1;
const LUA_MINSTACK = 20;
const LUAI_MAXCCALLS = 200;
const LUA_MASKCALL = 1 << 0;
const LUA_MASKRET = 1 << 1;
const LUA_MASKLINE = 1 << 2;

let installed = false;

export function installFastCalls(): void {
  if (installed) return;
  installed = true;
  const original = {
    precall: ldo.luaD_precall as (L: any, off: number, nresults: number) => boolean,
    poscall: ldo.luaD_poscall as (L: any, ci: any, firstResult: number, nres: number) => boolean,
    call: ldo.luaD_call as (L: any, off: number, nresults: number) => void,
  };

  function adjustTop(L: any, newtop: number): void {
    const stack = L.stack;
    let top: number = L.top;
    if (top < newtop) {
      while (top < newtop) stack[top++] = new TValue(LUA_TNIL, null);
    } else {
      while (top > newtop) stack[--top] = undefined;
    }
    L.top = top;
  }

  /** Clears the slots from `from` (inclusive, as fengari's loops start at the top) down to `to`. */
  function clearDown(stack: unknown[], from: number, to: number): void {
    for (let i = Math.min(from, stack.length - 1); i >= to; i--) stack[i] = undefined;
  }

  function moveresults(L: any, firstResult: number, res: number, nres: number, wanted: number): boolean {
    const stack = L.stack;
    switch (wanted) {
      case 0:
        break;
      case 1:
        if (nres === 0) stack[res].setnilvalue();
        else setobjs2s(L, res, firstResult);
        break;
      case LUA_MULTRET: {
        for (let i = 0; i < nres; i++) setobjs2s(L, res + i, firstResult + i);
        clearDown(stack, L.top, res + nres);
        L.top = res + nres;
        return false;
      }
      default: {
        let i;
        if (wanted <= nres) {
          for (i = 0; i < wanted; i++) setobjs2s(L, res + i, firstResult + i);
        } else {
          for (i = 0; i < nres; i++) setobjs2s(L, res + i, firstResult + i);
          for (; i < wanted; i++) {
            if (res + i >= L.top) stack[res + i] = new TValue(LUA_TNIL, null);
            else stack[res + i].setnilvalue();
          }
        }
        break;
      }
    }
    const newtop = res + wanted;
    clearDown(stack, L.top, newtop);
    L.top = newtop;
    return true;
  }

  function poscall(L: any, ci: any, firstResult: number, nres: number): boolean {
    if (L.hookmask & (LUA_MASKRET | LUA_MASKLINE)) return original.poscall(L, ci, firstResult, nres);
    const res: number = ci.funcOff;
    const wanted: number = ci.nresults;
    L.ci = ci.previous;
    L.ci.next = null;
    return moveresults(L, firstResult, res, nres, wanted);
  }

  function precall(L: any, off: number, nresults: number): boolean {
    const func = L.stack[off];
    if (L.hookmask & LUA_MASKCALL) return original.precall(L, off, nresults);
    switch (func.type) {
      case LUA_TCCL:
      case LUA_TLCF: {
        const f = func.type === LUA_TCCL ? func.value.f : func.value;
        ldo.luaD_checkstack(L, LUA_MINSTACK);
        const ci = lstate.luaE_extendCI(L);
        ci.funcOff = off;
        ci.nresults = nresults;
        ci.func = func;
        ci.top = L.top + LUA_MINSTACK;
        ci.callstatus = 0;
        const n = f(L);
        if (typeof n !== 'number' || n < 0 || (n | 0) !== n) throw Error('invalid return value from JS function (expected integer)');
        if (!(n < L.top - L.ci.funcOff)) throw Error('not enough elements in the stack');
        poscall(L, ci, L.top - n, n);
        return true;
      }
      case LUA_TLCL: {
        const p = func.value.p;
        if (p.is_vararg) return original.precall(L, off, nresults);
        let n = L.top - off - 1;
        const fsize: number = p.maxstacksize;
        ldo.luaD_checkstack(L, fsize);
        for (; n < p.numparams; n++) L.stack[L.top++] = new TValue(LUA_TNIL, null);
        const base = off + 1;
        const ci = lstate.luaE_extendCI(L);
        ci.funcOff = off;
        ci.nresults = nresults;
        ci.func = func;
        ci.l_base = base;
        ci.top = base + fsize;
        adjustTop(L, ci.top);
        ci.l_code = p.code;
        ci.l_savedpc = 0;
        ci.callstatus = lstate.CIST_LUA;
        return false;
      }
      default:
        return original.precall(L, off, nresults);
    }
  }

  function call(L: any, off: number, nresults: number): void {
    // The original raises the C-stack overflow error.
    if (L.nCcalls + 1 >= LUAI_MAXCCALLS) return original.call(L, off, nresults);
    L.nCcalls++;
    if (!precall(L, off, nresults)) lvm.luaV_execute(L);
    L.nCcalls--;
  }

  ldo.adjust_top = adjustTop;
  ldo.luaD_poscall = poscall;
  ldo.luaD_precall = precall;
  ldo.luaD_call = call;
  ldo.luaD_callnoyield = (L: any, off: number, nresults: number) => {
    L.nny++;
    call(L, off, nresults);
    L.nny--;
  };
}
