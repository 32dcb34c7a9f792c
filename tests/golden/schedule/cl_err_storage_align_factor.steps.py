b = sch.get_block("B")
sch.storage_align(b, 0, axis=0, factor=0, offset=1)
