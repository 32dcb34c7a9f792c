b = sch.get_block("B")
sch.storage_align(b, 0, axis=-3, factor=32, offset=1)
