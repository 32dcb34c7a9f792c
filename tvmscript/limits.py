"""How deeply a program may nest, a limit every layer shares.

A 900-term sum is a 900-deep Add chain, and the passes, the printer, pickling and code
generation recurse over expression trees a few Python frames per level. The parser refuses a
program nested deeper than `MAX_NESTING` with a diagnostic (tvmscript/parser/builder.py), and
``import tvmscript`` raises Python's recursion limit so that every later stage has room for it.
"""

MAX_NESTING = 1000
