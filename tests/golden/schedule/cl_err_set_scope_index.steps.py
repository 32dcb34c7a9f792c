b = sch.get_block("B")
sch.set_scope(b, 1, "local")
