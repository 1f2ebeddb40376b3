-- _clock.lua -- Redis's clock, read once per call (--@include), before a
-- script's fast path when that path needs it.  All times come from it:
-- now in ms, now_us in us.  (Each tonumber() of a string is a strtod:
-- two, not four.)
local T = redis.call('TIME')
local now_s, now_frac = tonumber(T[1]), tonumber(T[2])
local now = now_s * 1000 + (now_frac - now_frac % 1000) / 1000
local now_us = now_s * 1000000 + now_frac
