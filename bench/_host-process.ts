// Tests under test/ start the production host through this path; the harness is bench/_children.ts.
export { root, startHost, type Child as HostProcess } from './_children';
