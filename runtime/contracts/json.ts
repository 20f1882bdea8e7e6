/**
 * A JSON value as scripts and the service exchange it: what the Lua
 * marshalling produces and accepts, and what a match or world input is once
 * its schema has read it.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };
