"""Foilers: one module per phenomenon, registered in foilers.base.FOILERS."""
