b = sch.get_block("B")
sch.set_scope(b, "B", "shared.dyn")
