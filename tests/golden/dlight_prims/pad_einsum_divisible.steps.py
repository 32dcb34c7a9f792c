sch.pad_einsum(sch.get_sblock("mm"), [4, 64, 8])
