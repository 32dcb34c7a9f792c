b = sch.get_block("B")
i, = sch.get_loops(b)
sch.blockize(i)
