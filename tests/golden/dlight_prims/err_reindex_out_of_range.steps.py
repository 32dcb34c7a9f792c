sch.reindex(sch.get_sblock("mm"), ("read", 2))
