b = sch.get_block("B")
i, k = sch.get_loops(b)
f = sch.fuse(i, k)
sch.rfactor(f, 0)
