-- arena.lua: a 2-player movement duel.
--
-- Each player walks a 20x20 grid with `match.input` frames such as
-- {"dx": 1, "dy": 0}. Stepping onto the coin scores a point and moves the
-- coin. First to 5 points wins; after 60 seconds (600 ticks) the higher
-- score wins, or it is a draw.
--
-- The host calls the callbacks below; each receives the state table and
-- returns it (mutating in place is fine). Inputs are queued and applied at
-- the start of each 100 ms tick, before tick().
--
-- Written to be cheap, because a node runs thousands of these at 10 Hz:
-- the state is updated in place (no new tables per tick), work happens when
-- something changes (an input) rather than on every tick, and library
-- functions used on every call are kept in locals.

local geometry = require("lib.geometry")

-- Mode globals (read by the loader, see docs/scripting.md).
match_size = 2        -- the matchmaker forms groups of exactly 2
max_players = 2       -- nobody else can join by id
strategy = "fill"     -- first come, first matched
listed = false        -- matchmade only: not in GET /matches/live

local SIZE = 20
local WIN_SCORE = 5
local MAX_TICKS = 600 -- 60 s at 10 ticks per second

local random, clamp, step = math.random, geometry.clamp, geometry.step

local function place_coin(state)
  state.coin = { x = random(0, SIZE - 1), y = random(0, SIZE - 1) }
end

-- The winner's prize: coins in their wallet (catalogue.json declares the
-- currency; the store sells boots and magnets for them). game.economy
-- answers {ok = wallet} or {error = reason}; a prize that cannot be paid
-- is logged, never fatal to the match.
local PRIZE = 10

local function finish(state, result)
  -- The outcome first: a binding that waits on the database can outlast the
  -- callback's deadline, which stops the callback where it is, and the state
  -- keeps only what was written before.
  state._result = result
  state._finished = true
  if result.winner and game.economy then
    local paid = game.economy.grant(result.winner, "coins", PRIZE, "arena_win")
    if paid.error then game.log("warn", "prize not paid", { reason = paid.error }) end
  end
end

-- init(config) -> state. config = {match_id, mode} plus the operator's
-- game_modes entry for this mode, if any.
function init(config)
  local state = {
    match_id = config.match_id,
    tick = 0,
    players = {},  -- player_id -> {x, y, score}
    seats = 0,
    winner = nil,  -- set by handle_input when a player reaches WIN_SCORE
  }
  place_coin(state)
  return state
end

-- join(player_id, state[, ctx]) -> state, or nil/false[, reason] to refuse.
function join(player_id, state, ctx)
  if state.seats >= 2 then
    return nil, "arena_full"
  end
  state.seats = state.seats + 1
  -- Seat 1 starts in the top-left corner, seat 2 in the bottom-right one.
  local corner = state.seats == 1 and 0 or SIZE - 1
  state.players[player_id] = { x = corner, y = corner, score = 0 }
  game.log("info", "player joined the arena", { seat = state.seats })
  return state
end

-- leave(player_id, state) -> state. The remaining player wins by forfeit.
function leave(player_id, state)
  state.players[player_id] = nil
  for other in pairs(state.players) do
    finish(state, { winner = other, reason = "forfeit" })
  end
  return state
end

-- handle_input(player_id, input, state) -> state. One call per match.input.
function handle_input(player_id, input, state)
  local p = state.players[player_id]
  if p == nil or state.winner then return state end
  local x = clamp(p.x + step(input.dx), 0, SIZE - 1)
  local y = clamp(p.y + step(input.dy), 0, SIZE - 1)
  p.x, p.y = x, y
  local coin = state.coin
  if x == coin.x and y == coin.y then
    p.score = p.score + 1
    if p.score >= WIN_SCORE then state.winner = player_id end
    place_coin(state)
    -- Script events reach every player as match.<event>.
    game.broadcast("scored", { player_id = player_id, score = p.score })
  end
  return state
end

-- tick(state) -> state, every 100 ms. Setting _finished ends the match and
-- _result becomes the `result` of match.finished.
function tick(state)
  local t = state.tick + 1
  state.tick = t
  if state.winner then
    finish(state, { winner = state.winner, reason = "score" })
  elseif t >= MAX_TICKS then
    local best, best_score, tied = nil, -1, false
    for id, p in pairs(state.players) do
      if p.score > best_score then best, best_score, tied = id, p.score, false
      elseif p.score == best_score then tied = true end
    end
    finish(state, tied and { reason = "time", draw = true } or { winner = best, reason = "time" })
  end
  return state
end

-- get_state(player_id, state) -> the view sent as match.state to that
-- player. Build a fresh table: do not change `state` here.
function get_state(player_id, state)
  return {
    tick = state.tick,
    you = player_id,
    coin = state.coin,
    players = state.players,
  }
end
