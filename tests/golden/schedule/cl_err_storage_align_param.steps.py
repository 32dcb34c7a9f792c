c = sch.get_block("C")
sch.storage_align(c, 0, axis=0, factor=32, offset=1)
