-- arena_bots.lua: the arena duel, with a bot for anyone who queues alone.
--
-- The match itself is arena.lua (required here, so its callbacks become
-- this mode's); the `bots` global is what makes the difference. Every 8 s
-- the matchmaker tops up a queue that has a person waiting with bot tickets
-- up to `min_players`; a bot joins through join() like a person, and
-- bots/chaser.lua decides its inputs from the same view a client gets.

require("arena")

match_size = 2
max_players = 2
bots = { script = "bots/chaser.lua", min_players = 2 }
