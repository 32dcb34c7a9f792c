sch.transform_block_layout(sch.get_sblock("mm"), lambda i, j, k: (i * 0, i, j, k))
