import { sql, type Kysely } from 'kysely';

// Friends, groups, group join requests and invitations, chat and direct
// messages, notifications. Foreign keys to players never
// cascade: runtime/platform/erasure.ts deletes or severs every reference explicitly.
// Row rules (statuses, roles, request kinds) are enforced by the services, not
// by CHECK constraints.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('friendships')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('friend_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('status', 'varchar(16)', (c) => c.notNull().defaultTo('pending'))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('friendships_pair', ['player_id', 'friend_id'])
    .execute();
  await db.schema.createIndex('friendships_friend_id').on('friendships').column('friend_id').execute();

  await db.schema
    .createTable('groups')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('name', 'varchar(64)', (c) => c.notNull())
    .addColumn('description', 'varchar(1024)')
    .addColumn('max_members', 'integer', (c) => c.notNull().defaultTo(50))
    .addColumn('open', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('creator_id', 'uuid', (c) => c.references('players.id'))
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('groups_creator_id').on('groups').column('creator_id').execute();

  await db.schema
    .createTable('group_members')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('group_id', 'uuid', (c) => c.notNull().references('groups.id'))
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('role', 'varchar(16)', (c) => c.notNull().defaultTo('member'))
    .addColumn('joined_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('group_members_pair', ['group_id', 'player_id'])
    .execute();
  await db.schema.createIndex('group_members_player_id').on('group_members').column('player_id').execute();

  // A pending way into a closed group: `request` (the player asked; an admin
  // accepts) or `invite` (an admin asked; the player joins).
  await db.schema
    .createTable('group_requests')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('group_id', 'uuid', (c) => c.notNull().references('groups.id'))
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('kind', 'varchar(16)', (c) => c.notNull())
    .addColumn('invited_by', 'uuid', (c) => c.references('players.id'))
    .addColumn('inserted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('group_requests_pair', ['group_id', 'player_id'])
    .execute();
  await db.schema.createIndex('group_requests_player_id').on('group_requests').column('player_id').execute();
  await db.schema.createIndex('group_requests_invited_by').on('group_requests').column('invited_by').execute();

  // Chat and direct messages. `recipient_id` is set on direct messages only,
  // so erasing either participant removes the whole conversation.
  await db.schema
    .createTable('chat_messages')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('channel_type', 'varchar(16)', (c) => c.notNull())
    .addColumn('channel_id', 'varchar(256)', (c) => c.notNull())
    .addColumn('sender_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('recipient_id', 'uuid', (c) => c.references('players.id'))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('metadata', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('sent_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('chat_messages_channel').on('chat_messages').columns(['channel_id', 'id']).execute();
  await db.schema.createIndex('chat_messages_sender_id').on('chat_messages').column('sender_id').execute();
  await db.schema.createIndex('chat_messages_recipient_id').on('chat_messages').column('recipient_id').execute();
  await db.schema.createIndex('chat_messages_sent_at').on('chat_messages').column('sent_at').execute();

  await db.schema
    .createTable('notifications')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('player_id', 'uuid', (c) => c.notNull().references('players.id'))
    .addColumn('type', 'varchar(64)', (c) => c.notNull())
    .addColumn('subject', 'varchar(255)', (c) => c.notNull())
    .addColumn('content', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('read', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('sent_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('notifications_player').on('notifications').columns(['player_id', 'id']).execute();
  await db.schema.createIndex('notifications_sent_at').on('notifications').column('sent_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['notifications', 'chat_messages', 'group_requests', 'group_members', 'groups', 'friendships']) {
    await db.schema.dropTable(table).execute();
  }
}
