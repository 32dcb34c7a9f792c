block_C = sch.get_block("C")
i0, j0, tx, k0, k1, i2, j2 = sch.get_loops(block_C)
for name in ("A_shared", "B_shared"):
    blk = sch.get_block(name)
    sch.compute_at(blk, k0)
    inner0, inner1 = sch.get_loops(blk)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx_, vec = sch.split(inner, factors=[None, 64, 4])
    sch.vectorize(vec)
    sch.bind(tx_, "threadIdx.x")
