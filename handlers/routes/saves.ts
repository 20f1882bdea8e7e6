import { listSaves, readSave, writeSave } from '../../runtime/saves/saves';
import { CloudSave, SaveList, SaveWrite, SlotPath } from '../../runtime/schemas/saves';
import { route, type Route } from '../contract';
import { storageSwitch } from './storage';

const common = { tag: 'saves', auth: 'player', rate: 'api', precondition: storageSwitch('save.not_found') } as const;

/** Cloud saves: up to ten named slots per player, each versioned for optimistic concurrency. */
export const saveRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/saves',
    summary: "The caller's save slots: name, version and last write, without the data",
    ...common,
    response: SaveList,
    errors: ['save.not_found'],
    handle: async ({ ctx, player }) => ({ saves: await listSaves(ctx.db, player.playerId) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/saves/:slot',
    summary: 'One save slot with its data',
    ...common,
    params: SlotPath,
    response: CloudSave,
    errors: ['save.not_found'],
    handle: ({ ctx, player, params }) => readSave(ctx.db, player.playerId, params.slot),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/saves/:slot',
    summary: 'Create or replace a save slot; with `version`, only if the slot is still at that version',
    ...common,
    params: SlotPath,
    body: SaveWrite,
    response: CloudSave,
    errors: ['save.not_found', 'save.too_large', 'save.version_conflict', 'save.slot_limit_reached'],
    handle: ({ ctx, player, params, body }) => writeSave(ctx, player.playerId, params.slot, body),
  }),
];
