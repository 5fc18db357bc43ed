-- churn.lua: Lua table and string churn for bench/profile.sh (lua5.4 churn.lua [ROUNDS]).
-- Lua allocates through one realloc-style function over malloc/realloc/free, so this is also
-- a realloc-heavy workload: tables grow by doubling, strings are concatenated and interned.
-- Each round builds records (tables with string fields and an array part), a working set
-- that grows during the first half of the rounds and shrinks in the second, and garbage for
-- the collector. Deterministic (a fixed LCG, no os.time, no pairs() order in the checksum):
-- prints one checksum line.
local rounds = tonumber(arg[1]) or 60

local state = 42
local function rand(n)
  state = (state * 1103515245 + 12345) % 2147483648
  return state % n
end

local function make_record(i)
  local name = string.format("user-%d-%x", i, rand(65536))
  local rec = { id = i, name = name, score = rand(10007), tags = {} }
  for t = 1, 1 + rand(6) do
    rec.tags[t] = name:sub(1, t + 2) .. tostring(rand(997))
  end
  rec.blob = string.rep("x", 16 + rand(200))
  return rec
end

local keep = {}
local checksum = 0

for r = 1, rounds do
  local records = {}
  for i = 1, 5000 do
    records[i] = make_record(i + r)
  end
  -- The working set: grows, then shrinks by a quarter each round.
  if r <= rounds // 2 then
    for i = 1, #records, 4 + r % 3 do
      keep[#keep + 1] = records[i]
    end
  else
    local n = #keep
    local cut = n // 4
    local moved = {}
    for i = cut + 1, n do
      moved[#moved + 1] = keep[i]
    end
    keep = moved
  end
  -- Strings: concatenation, gsub, a table keyed by substrings.
  local parts = {}
  for i = 1, #records, 3 do
    parts[#parts + 1] = records[i].name
  end
  local text = table.concat(parts, " ")
  local index = {}
  for w in text:gmatch("%S+") do
    local k = w:sub(1, 7)
    local list = index[k]
    if not list then
      list = {}
      index[k] = list
    end
    list[#list + 1] = #w
  end
  local keys = {}
  for k in pairs(index) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local s = 0
    for _, v in ipairs(index[k]) do
      s = s + v
    end
    checksum = (checksum * 131 + #k + s) % 4294967296
  end
  local upper = text:gsub("user", "USER"):upper()
  checksum = (checksum + #upper + #keep) % 4294967296
  -- Sort records by score (a fresh array of references).
  local byscore = {}
  for i = 1, #records do
    byscore[i] = records[i]
  end
  table.sort(byscore, function(a, b)
    if a.score ~= b.score then
      return a.score < b.score
    end
    return a.id < b.id
  end)
  for i = 1, #byscore, 101 do
    checksum = (checksum * 31 + byscore[i].score + #byscore[i].tags) % 4294967296
  end
end

local kept = 0
for _, rec in ipairs(keep) do
  kept = kept + #rec.blob
end
print(string.format("churn.lua rounds=%d kept=%d kept_bytes=%d checksum=%08x", rounds, #keep, kept,
  checksum))
