"""Parameter server over ZeroMQ: wire format, blocks, shard, client, keys, command line."""
