b = sch.get_block("B")
i, j, k = sch.get_loops(b)
sch.fuse(j, k)
