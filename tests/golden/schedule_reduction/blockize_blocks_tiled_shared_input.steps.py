b = sch.get_block("B")
c = sch.get_block("C")
sch.blockize([b, c])
