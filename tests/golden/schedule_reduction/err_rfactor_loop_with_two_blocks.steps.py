b = sch.get_block("B")
i, k = sch.get_loops(b)
sch.rfactor(k, 0)
