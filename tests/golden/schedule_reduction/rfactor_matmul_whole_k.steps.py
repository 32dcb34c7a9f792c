c = sch.get_block("C")
i, j, k = sch.get_loops(c)
sch.rfactor(k, 0)
