b = sch.get_block("B")
sch.cache_read(b, 0, "shared")
sch.cache_read(b, 0, "local")
