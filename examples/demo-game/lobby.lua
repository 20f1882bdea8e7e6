-- lobby.lua: a listed drop-in room where up to 16 players chat-wave at
-- each other. Shows listing, join refusal with a reason, join context,
-- game.send, and the shared view strategy.

match_size = 1          -- a single matchmade player opens a room
max_players = 16
listed = true           -- shows in match.list and GET /matches/live
quick_play = true       -- match.find_or_create may place players here
state_strategy = "shared" -- get_state(state) once per tick for everybody

function init(config)
  return { tick = 0, members = {}, waves = 0, banned = {} }
end

-- ctx is the optional `ctx` object of match.join (flat, at most 8 keys).
function join(player_id, state, ctx)
  if state.banned[player_id] then
    return false, "banned"
  end
  local name = type(ctx.name) == "string" and ctx.name or "guest"
  state.members[player_id] = { name = name, joined_tick = state.tick }
  -- Only this player receives module.message {module = "lua", message = ...}.
  game.send(player_id, { welcome = "hello " .. name })
  return state
end

function leave(player_id, state)
  state.members[player_id] = nil
  return state
end

-- Input {"wave": true} waves at everybody; {"close": true} stops new joins.
function handle_input(player_id, input, state)
  if input.wave then
    state.waves = state.waves + 1
    game.broadcast("wave", { from = player_id })
  end
  if input.close then
    game.match.set_joinable(false)
  end
  return state
end

function tick(state)
  state.tick = state.tick + 1
  return state
end

-- Shared strategy: one argument, one view for all members.
function get_state(state)
  return { tick = state.tick, members = state.members, waves = state.waves }
end
