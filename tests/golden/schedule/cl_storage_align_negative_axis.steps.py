b = sch.get_block("B")
sch.storage_align(b, 0, axis=-1, factor=32, offset=1)
