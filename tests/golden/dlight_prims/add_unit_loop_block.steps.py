sch.add_unit_loop(sch.get_sblock("B"))
