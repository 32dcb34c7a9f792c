b = sch.get_block("B")
c = sch.get_block("C")
d = sch.get_block("D")
sch.cache_write(b, 0, "shared", consumer_blocks=[c, d])
