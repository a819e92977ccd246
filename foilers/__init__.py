"""Foilers: one module per phenomenon, registered in foilforge.foiler.FOILERS."""
