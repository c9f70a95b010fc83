"""The generators behind scripts/gen_goldens.py, one module per op group."""
