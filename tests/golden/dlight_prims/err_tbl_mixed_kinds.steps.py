sch.transform_block_layout(sch.get_sblock("mm"), lambda i, j, k: (i, j * 200 + k))
