block_Y = sch.get_block("Y", func_name="mm_relu")
i, j, k = sch.get_loops(block_Y)
consumer = sch.get_consumers(block_Y)[0]
sch.reverse_compute_at(consumer, j)
