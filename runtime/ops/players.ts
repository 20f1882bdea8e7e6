import { unclaimed } from '../accounts/guests';
import type { Ctx } from '../contracts/context';
import { ApiError } from '../contracts/errors';
import { profileView, PUBLIC_COLUMNS } from '../players/players';
import type { Player } from '../schemas/players';
import { sqlPage, type ListPage, type ListRequest } from './lists';
import type { ListRules } from '../schemas/ops';

/** Players as operators read them: the public projection, never credentials, identities or the guest flag itself. */

export const PLAYER_LIST: ListRules = {
  sorts: ['id', 'username', 'display_name', 'inserted_at', 'updated_at'],
  unique: 'id',
  default: { sort: 'id', order: 'asc' },
  // `guest=true`: unclaimed guests only; `false`: everyone else.
  filters: { guest: 'boolean' },
  q: ['username', 'display_name'],
};

export async function listPlayers(ctx: Pick<Ctx, 'db'>, request: ListRequest): Promise<ListPage<Player>> {
  // The guest flag is computed per row, so the list reads a derived table where it is a plain column to filter on.
  const players = ctx.db
    .selectFrom((eb) => eb.selectFrom('players as p').select([...PUBLIC_COLUMNS.map((c) => `p.${c}` as const), unclaimed('p').as('guest')]).as('players'))
    .select(PUBLIC_COLUMNS);
  const page = await sqlPage(players, PLAYER_LIST, request);
  return { ...page, data: page.data.map(profileView) };
}

export async function getOpsPlayer(ctx: Pick<Ctx, 'db'>, id: string): Promise<Player> {
  const row = await ctx.db.selectFrom('players').select(PUBLIC_COLUMNS).where('id', '=', id).executeTakeFirst();
  if (!row) throw new ApiError('ops.not_found', 'No such player.');
  return profileView(row);
}
