-- village.lua: a small persistent-free world. Players walk around a 4x4
-- grid of zones; sheep wander on their own; players near each other can
-- talk on the `prox:` chat channels of the zones they see.
--
-- A world mode is one world VM (the global state: init, join, leave,
-- spawn_position, post_tick) plus one zone VM per running zone (its entity
-- table: zone_tick, handle_input, handle_effects), all from this script.

game_type = "world"
match_size = 1
max_players = 8
tick_rate = 50          -- ms between world ticks
grid_size = 4           -- zones per side
zone_size = 100         -- world units per zone side
view_radius = 1         -- each player sees its zone and the eight around it
empty_grace_ms = 30000  -- an empty village lingers 30 s before it ends

local SPEED = 4
local EDGE = grid_size * zone_size - 1

-- Entity templates zones may spawn with game.zone.spawn.
function spawn_templates(config)
  return { sheep = { type = "sheep", wool = 3 } }
end

-- ---- the world VM ---------------------------------------------------------

function init(config)
  return { visitors = 0 }
end

function join(player_id, state)
  state.visitors = state.visitors + 1
  return state
end

function leave(player_id, state)
  return state
end

-- Everyone arrives in the village square.
function spawn_position(player_id, state)
  return { x = 150 + math.random(0, 20), y = 150 + math.random(0, 20) }
end

function post_tick(tick, state)
  return state
end

-- ---- zone VMs ---------------------------------------------------------------

local function clamp(v) return math.max(0, math.min(EDGE, v)) end

function zone_tick(entities, zone_state)
  zone_state = zone_state or { flock = false }
  -- Each zone lets two sheep loose the first time it runs; a spawned
  -- entity lands in whichever zone holds its position.
  if not zone_state.flock then
    zone_state.flock = true
    for i = 1, 2 do
      game.zone.spawn("sheep", math.random(0, EDGE), math.random(0, EDGE))
    end
  end
  for id, e in pairs(entities) do
    if e.type == "sheep" and math.random(1, 10) == 1 then
      e.x = clamp(e.x + math.random(-2, 2))
      e.y = clamp(e.y + math.random(-2, 2))
    end
  end
  return entities, zone_state
end

-- `world.input` payloads: {dx = -1..1, dy = -1..1}.
function handle_input(player_id, input, entities)
  local me = entities[player_id]
  if not me then return entities end
  local dx, dy = tonumber(input.dx) or 0, tonumber(input.dy) or 0
  me.x = clamp(me.x + math.max(-1, math.min(1, dx)) * SPEED)
  me.y = clamp(me.y + math.max(-1, math.min(1, dy)) * SPEED)
  return entities
end

function handle_effects(effects, entities)
  return entities
end
