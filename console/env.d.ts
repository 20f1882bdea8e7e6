/** The core version this console was built for (esbuild `define`, from package.json). */
declare const __CORE_VERSION__: string;

declare module '*.css';
