-- A module shared by the modes, loaded with require("lib.geometry").
-- Modules run in the VM of the script that requires them and are cached in
-- _SVC_LOADED; hot reload empties that cache so edits here are picked up
-- when the requiring script is reloaded.
local geometry = {}

-- Keeps v within [lo, hi].
function geometry.clamp(v, lo, hi)
  if v < lo then return lo end
  if v > hi then return hi end
  return v
end

-- Reads a movement component from client input: any number is rounded to
-- one step in either direction, anything else means "no movement".
local type = type
function geometry.step(value)
  if type(value) ~= "number" then return 0 end
  if value >= 0.5 then return 1 end
  if value < -0.5 then return -1 end
  return 0
end

return geometry
