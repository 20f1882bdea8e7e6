// fengari ships no types. Its public API is reached through runtime/lua/vm.ts;
// its internal modules only through runtime/lua/fengari-internals.ts.
declare module 'fengari' {
  const fengari: any;
  export default fengari;
}
declare module 'fengari/src/lobject.js' {
  const lobject: any;
  export default lobject;
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
