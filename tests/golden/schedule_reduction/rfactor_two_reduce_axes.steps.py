b = sch.get_block("B")
i, k, l = sch.get_loops(b)
sch.rfactor(l, 1)
