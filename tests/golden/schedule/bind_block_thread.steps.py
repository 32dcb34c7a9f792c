b = sch.get_block("B")
i, j = sch.get_loops(b)
sch.bind(i, "blockIdx.x")
sch.bind(j, "threadIdx.x")
