c = sch.get_block("C")
i, j, k = sch.get_loops(c)
C_local = sch.cache_write(c, 0, "local")
sch.reverse_compute_at(C_local, i)
