d = sch.get_block("D")
sch.cache_read(d, 0, "local", consumer_blocks=[d])
