b = sch.get_block("B")
i, k = sch.get_loops(b)
sch.bind(i, "blockIdx.x")
sch.bind(k, "threadIdx.x")
