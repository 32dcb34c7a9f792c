sch.add_unit_loop(sch.get_loops(sch.get_sblock("B"))[1])
