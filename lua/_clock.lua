-- _clock.lua -- Redis's clock, read once per call (--@include), before a
-- script's fast path when that path needs it.  All times come from it:
-- now in ms, now_us in us.  (Each string turned into a number is a strtod:
-- two, not four, and by arithmetic, not a call of tonumber: bench/RESULTS.md.)
local T = redis.call('TIME')
local now_us = T[1] * 1000000 + T[2]
local now = (now_us - now_us % 1000) / 1000
