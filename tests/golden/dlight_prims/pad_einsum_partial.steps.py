sch.pad_einsum(sch.get_sblock("mm"), [32, 64, 8])
