b = sch.get_block("T_add", func_name="main")
ax0, ax1 = sch.get_loops(b)
sch.split(ax1, factors=[None, 32])
sch.split(ax0, factors=[4, None])
