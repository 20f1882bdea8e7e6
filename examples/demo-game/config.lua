-- config.lua: the manifest of a multi-mode game.
--
-- It returns a table of mode name -> script path (relative to this
-- directory). It may also declare the deployment-wide globals below; they
-- are read once at boot (editing them needs a restart).
--
-- This file runs without the `game` table and without `require`: keep it
-- to plain assignments.

-- Players may sign in as guests (the operator still has to configure a
-- guest pepper; see docs/operations.md).
guest_auth = true

-- Uncomment to narrow sign-ups when the operator left `registration` unset:
-- script_registration = "oauth_only"

return {
  arena = "arena.lua", -- 2-player movement duel, matchmade
  arena_bots = "arena_bots.lua", -- the duel, a bot fills in for a missing player
  lobby = "lobby.lua", -- listed drop-in room, joinable from the live list
  skirmish = "skirmish.lua", -- a round in phases: warmup, fight once 2 are in, results
  village = "village.lua", -- a small world: walkers and sheep in zones
}
