-- skirmish.lua: a short round in phases. Shows phases(config), the
-- on_phase_started / on_phase_ended callbacks, every kind of phase start,
-- and a match that ends on its own when its last phase does
-- (result {status = "phases_complete"}).
--
-- warmup (5 s, starts when the match is made) -> fight (once 2 players are
-- in, 30 s) -> results (5 s), then the match finishes. Players score with
-- {"tag": true} during the fight only; everyone sees the current phase in
-- their view and gets match.phase {name = ...} on each change.

match_size = 1          -- the first player opens a round; others drop in
max_players = 4
listed = true           -- the live list shows the phase each round is in
quick_play = true

-- Runs once per match in a throwaway probe VM: no game.* effects, no state.
function phases(config)
  return {
    { name = "warmup", duration = 5000 },
    { name = "fight", start = { players = 2 }, duration = 30000, config = { points_per_tag = 1 } },
    { name = "results", start = "prev_ended", duration = 5000 },
  }
end

function init(config)
  return { phase = "none", scores = {}, tick = 0 }
end

function on_phase_started(name, state)
  state.phase = name
  game.broadcast("phase", { name = name })
  return state
end

function on_phase_ended(name, state)
  if name == "fight" then
    local best, top = nil, -1
    for id, points in pairs(state.scores) do
      if points > top then best, top = id, points end
    end
    state.winner = best
  end
  return state
end

function join(player_id, state)
  state.scores[player_id] = state.scores[player_id] or 0
  return state
end

function leave(player_id, state)
  return state
end

function handle_input(player_id, input, state)
  if input.tag and state.phase == "fight" then
    state.scores[player_id] = (state.scores[player_id] or 0) + 1
  end
  return state
end

function tick(state)
  state.tick = state.tick + 1
  return state
end

function get_state(player_id, state)
  return { phase = state.phase, scores = state.scores, winner = state.winner, you = player_id }
end
