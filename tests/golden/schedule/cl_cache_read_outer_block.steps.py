b = sch.get_block("outer")
sch.cache_read(b, 0, "shared")
