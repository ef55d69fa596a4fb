"""The command line: ``treeimp explain`` and ``treeimp demo`` (also ``python -m treeimp``)."""
