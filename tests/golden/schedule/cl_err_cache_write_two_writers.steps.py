b = sch.get_block("B1")
sch.cache_write(b, 0, "local")
