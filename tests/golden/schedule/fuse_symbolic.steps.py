b = sch.get_block("B")
i, j = sch.get_loops(b)
f = sch.fuse(i, j)
sch.split(f, factors=[None, 128])
