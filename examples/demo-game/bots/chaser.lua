-- bots/chaser.lua: the bot script of the `arena_bots` mode.
--
-- think(bot_id, state) runs every 100 ms with the view the match made for
-- this bot (arena.lua's get_state) and returns the bot's next input. There
-- is no `game` table here, and whatever think writes to module-level
-- variables is put back after the call: keep no memory between calls.

names = { "Rook", "Wren", "Moss" }

local function toward(from, to)
  if to > from then return 1 elseif to < from then return -1 end
  return 0
end

function think(bot_id, state)
  local me = state.players and state.players[bot_id]
  if not me or not state.coin then return nil end
  -- One axis at a time, like a person with arrow keys.
  local dx = toward(me.x, state.coin.x)
  if dx ~= 0 then return { dx = dx, dy = 0 } end
  return { dx = 0, dy = toward(me.y, state.coin.y) }
end
