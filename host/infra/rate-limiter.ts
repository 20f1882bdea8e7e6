// The limiter moved to runtime/platform/rate-limiter.ts; this path stays only
// until the script-lane worker (host/realtime/lanes/worker.ts), mid-reshape,
// imports it from there.
export { WindowLimiter } from '../../runtime/platform/rate-limiter';
