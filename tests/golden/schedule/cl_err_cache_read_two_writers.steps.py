c = sch.get_block("C")
sch.cache_read(c, 0, "local")
