sch.fuse(sch.get_loops(sch.get_sblock("B"))[1])
