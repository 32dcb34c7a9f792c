b = sch.get_block("B")
i, j = sch.get_loops(b)
A_shared = sch.cache_read(b, 0, "shared")
sch.compute_at(A_shared, i)
