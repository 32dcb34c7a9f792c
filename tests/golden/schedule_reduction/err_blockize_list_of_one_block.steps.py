b = sch.get_block("B")
sch.blockize([b])
