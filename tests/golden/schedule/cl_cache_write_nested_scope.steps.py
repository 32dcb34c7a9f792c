b = sch.get_block("B")
sch.cache_write(b, 0, "local")
