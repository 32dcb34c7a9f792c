i, j = sch.get_loops(sch.get_block("C"))
f = sch.fuse(i, j)
f0, f1 = sch.split(f, [None, 96])
sch.compute_at(sch.get_block("B"), f0)
