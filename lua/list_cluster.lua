#!lua flags=no-writes,allow-cross-slot-keys
-- list_cluster.lua: list.lua for Redis Cluster mode.  A script may read
-- keys of several slots only when it says so (the flag above, Redis 7.0):
-- the keys SCAN finds on this master are in many slots.  The gateway runs
-- it on each master in turn (handlers/listing.c).
--@include _layout.lua
--@include _clock.lua
--@include _holders.lua
--@include _list.lua
