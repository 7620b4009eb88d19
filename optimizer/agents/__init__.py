"""Agents propose one kernel edit per round behind one small interface (``base.Agent``)."""
