sch.get_block("nope")
