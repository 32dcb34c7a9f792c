b = sch.get_sblock("mm")
sch.reindex(b, ("write", 0))
sch.reindex(b, ("read", 0))
sch.reindex(b, ("read", 1))
