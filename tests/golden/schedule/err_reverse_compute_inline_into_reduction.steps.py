block_C = sch.get_block("C", func_name="mm_relu")
sch.reverse_compute_inline(block_C)
