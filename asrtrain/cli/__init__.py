"""The ``asrtrain`` command line: a root group and one thin module per command.

Command modules import only click at the top; the library they call is imported
inside the command body, so ``asrtrain --help`` stays fast.
"""
