import { ApiError } from '../../runtime/contracts/errors';
import type { Ctx } from '../../runtime/contracts/context';
import { Success } from '../../runtime/schemas/common';
import { CollectionPath, CollectionQuery, ObjectPath, OwnerQuery, StorageObject, StorageObjectList, StorageWrite } from '../../runtime/schemas/storage';
import { deleteObject, listObjects, readObject, writeObject } from '../../runtime/storage/storage';
import { route, type Route } from '../contract';

/** With the `storage` setting off, saves and storage do not exist: every route answers its domain's not-found code. */
export function storageSwitch(notFound: 'save.not_found' | 'storage.not_found'): (ctx: Ctx) => void {
  return (ctx) => {
    if (!ctx.settings.storage) throw new ApiError(notFound, 'Saves and storage are switched off on this server.');
  };
}

const common = { tag: 'storage', auth: 'player', rate: 'api', precondition: storageSwitch('storage.not_found') } as const;

/** Storage objects: rows per player, `?owner=` reaching another player's rows as their perms allow. */
export const storageRoutes: Route[] = [
  route({
    method: 'GET',
    path: '/api/v1/storage/:collection',
    summary: "The caller's objects in a collection, or with `owner` another player's public ones; newest first",
    ...common,
    params: CollectionPath,
    query: CollectionQuery,
    response: StorageObjectList,
    errors: ['storage.not_found'],
    handle: async ({ ctx, player, params, query }) => ({ objects: await listObjects(ctx.db, player.playerId, params.collection, query) }),
  }),
  route({
    method: 'GET',
    path: '/api/v1/storage/:collection/:key',
    summary: "One of the caller's objects, or with `owner` another player's public one",
    ...common,
    params: ObjectPath,
    query: OwnerQuery,
    response: StorageObject,
    errors: ['storage.not_found'],
    handle: ({ ctx, player, params, query }) => readObject(ctx.db, player.playerId, { owner: query.owner ?? player.playerId, ...params }),
  }),
  route({
    method: 'PUT',
    path: '/api/v1/storage/:collection/:key',
    summary: "Create or replace one of the caller's objects and its perms; with `owner`, replace the value of another player's object whose write_perm is public",
    ...common,
    params: ObjectPath,
    query: OwnerQuery,
    body: StorageWrite,
    notObject: () => new ApiError('storage.invalid_request', 'The body must be a JSON object.'),
    response: StorageObject,
    errors: ['storage.not_found', 'storage.forbidden', 'storage.invalid_request', 'storage.value_too_large', 'storage.invalid_perm'],
    handle: ({ ctx, player, params, query, body }) => writeObject(ctx, player.playerId, { owner: query.owner ?? player.playerId, ...params }, body),
  }),
  route({
    method: 'DELETE',
    path: '/api/v1/storage/:collection/:key',
    summary: "Delete one of the caller's objects, or with `owner` another player's whose write_perm is public",
    ...common,
    params: ObjectPath,
    query: OwnerQuery,
    response: Success,
    errors: ['storage.not_found', 'storage.forbidden'],
    handle: async ({ ctx, player, params, query }) => {
      await deleteObject(ctx.db, player.playerId, { owner: query.owner ?? player.playerId, ...params });
      return { success: true as const };
    },
  }),
];
