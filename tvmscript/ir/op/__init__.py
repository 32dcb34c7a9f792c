"""Relax operators on the IR's side: what op inference and the TE definitions share."""
