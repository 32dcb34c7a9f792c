b = sch.get_block("B")
sch.cache_write(b, 0, "local", consumer_blocks=[sch.get_block("D")])
