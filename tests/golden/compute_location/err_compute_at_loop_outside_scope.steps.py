io, = sch.get_loops(sch.get_block("outer"))
sch.compute_at(sch.get_block("B"), io)
