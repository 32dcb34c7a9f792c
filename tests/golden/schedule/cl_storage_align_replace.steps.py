b = sch.get_block("B")
sch.storage_align(b, 0, axis=0, factor=32, offset=1)
sch.storage_align(b, 0, axis=1, factor=16, offset=2)
sch.storage_align(b, 0, axis=0, factor=8, offset=3)
