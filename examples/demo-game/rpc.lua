-- rpc.lua: the game's own RPC methods.
--
-- Every function in the global `rpc` table is a method a client calls as
-- `game.<name>`, over the socket (`rpc.call`) or REST
-- (`POST /api/v1/rpc/game.<name>` with `{"params": {...}}`). A function gets
-- the caller's player id and the params object, and answers with
--   a table           -> the result object
--   nothing           -> {}
--   nil [, "reason"]  -> rpc.error validation_failed, details.reason
-- An error, an endless loop or any other return value fails that call alone
-- (rpc.error internal; the log says why).
--
-- One VM serves every caller, so globals outlive a call; this file is
-- re-evaluated in place when it changes (keep globals with `x = x or ...`).

rolls = rolls or 0

rpc = {}

-- A die roll for lobby games: {sides = 2..100}, default 6.
function rpc.roll(player_id, params)
  local sides = params.sides or 6
  if type(sides) ~= "number" or sides < 2 or sides > 100 then
    return nil, "sides_out_of_range"
  end
  rolls = rolls + 1
  return { value = math.random(math.floor(sides)), sides = math.floor(sides), rolls_on_this_node = rolls }
end

-- The server's clock, for clients that want to line their timers up.
function rpc.time(player_id, params)
  return { unix = os.time() }
end

-- What each real-money product is worth, in gems (catalogue.json declares them).
local PACKS = { gems_100 = 100, gems_550 = 550 }

-- game.claim_pack {provider = "apple" | "google", transaction_id}: after
-- POST /api/v1/iap/<provider> answered 200, the app passes the answer's
-- `transaction_id` (Apple) or `order_id` (Google). The product comes from the
-- receipt the service recorded for this player, never from the client, and
-- redeem pays a receipt once: a second claim answers "already_redeemed".
function rpc.claim_pack(player_id, params)
  if type(params.provider) ~= "string" or type(params.transaction_id) ~= "string" then
    return nil, "provider_and_transaction_id_required"
  end
  local receipt = game.receipts.get(player_id, params.provider, params.transaction_id)
  if receipt.error then return nil, receipt.error end
  local gems = PACKS[receipt.ok.product_id]
  if gems == nil then return nil, "unknown_product" end
  local redeemed = game.receipts.redeem(player_id, params.provider, params.transaction_id, { gems = gems })
  if redeemed.error then return nil, redeemed.error end
  return { gems = redeemed.ok[1].balance }
end
