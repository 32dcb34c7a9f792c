b = sch.get_block("B")
i, = sch.get_loops(b)
i0, i1, i2 = sch.split(i, factors=[None, 4, 8])
sch.fuse(i1, i2)
