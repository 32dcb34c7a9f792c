b = sch.get_block("B")
i, = sch.get_loops(b)
i0, i1 = sch.split(i, [None, 8])
sch.cache_write(b, 0, "local")
