b = sch.get_block("B")
c = sch.get_block("C")
sch.cache_read(b, 0, "shared", consumer_blocks=[b])
sch.cache_read(c, 0, "shared.dyn")
