"""foilforge's top layer: the DVC stages, the CLI they call and the annotation app."""
