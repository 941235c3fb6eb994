"""Expressions evaluated over Arrow data: the reference semantics of every function.

The local executor evaluates its operators' expressions with these kernels, and the planner folds
constant calls with them, so a folded value is exactly what a run computes. ``trees`` reads and
rebuilds nested values (maps, lists, unions) inside Arrow arrays.
"""
