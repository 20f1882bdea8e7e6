// fengari ships no types; the runtime reaches it through runtime/lua/vm.ts only.
declare module 'fengari' {
  const fengari: any;
  export default fengari;
}
declare module 'fengari/src/lobject.js' {
  const lobject: any;
  export default lobject;
}
declare module 'fengari/src/lauxlib.js' {
  const lauxlib: any;
  export default lauxlib;
}
declare module 'fengari/src/lstring.js' {
  const lstring: any;
  export default lstring;
}
declare module 'fengari/src/ldo.js' {
  const ldo: any;
  export default ldo;
}
declare module 'fengari/src/lstate.js' {
  const lstate: any;
  export default lstate;
}
declare module 'fengari/src/lvm.js' {
  const lvm: any;
  export default lvm;
}
declare module 'fengari/src/ltable.js' {
  const ltable: any;
  export default ltable;
}
