b = sch.get_block("T_transpose", func_name="main")
ax0, ax1 = sch.get_loops(b)
f = sch.fuse(ax0, ax1)
sch.split(f, factors=[None, 1024])
