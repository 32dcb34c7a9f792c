b = sch.get_block("B")
A_shared = sch.cache_read(b, 0, "shared")
sch.set_scope(A_shared, 0, "local")
